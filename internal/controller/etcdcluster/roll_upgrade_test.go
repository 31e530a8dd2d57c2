package etcdcluster

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

func TestUpgradeHold(t *testing.T) {
	cases := []struct {
		name string
		u    upgradeState
		hold bool
	}{
		{name: "no minor upgrade", u: upgradeState{}, hold: false},
		{name: "refused path", u: upgradeState{minor: true, pathErr: errors.New("refused"), backup: nil}, hold: true},
		{name: "backup not made", u: upgradeState{minor: true}, hold: true},
		{name: "backup running", u: upgradeState{minor: true, backup: &etcdv1alpha1.EtcdBackup{}, backupState: backupRunning}, hold: true},
		{name: "backup failed", u: upgradeState{minor: true, backup: &etcdv1alpha1.EtcdBackup{}, backupState: backupFailed}, hold: true},
		{name: "backup done", u: upgradeState{minor: true, backup: &etcdv1alpha1.EtcdBackup{}, backupState: backupDone}, hold: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.u.hold()).To(Equal(tc.hold))
		})
	}
}
