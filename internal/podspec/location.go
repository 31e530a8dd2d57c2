package podspec

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// DefaultAgentImage is Tend's image when nobody says which: the manager
// passes its own (--agent-image).
const DefaultAgentImage = "ghcr.io/tend-dev/tend:dev"

// AgentBinary is the tend binary in Tend's image; its subcommands are the
// agents.
const AgentBinary = "/tend"

// Where the agents find their inputs inside a pod.
const (
	// ConnectionDir holds the cluster's connection ConfigMap: the keys
	// ConnectionEndpoints and ConnectionCA.
	ConnectionDir = "/etc/tend/connection"
	// ClientTLSDir holds the cluster's client certificate Secret
	// (tls.crt, tls.key, ca.crt).
	ClientTLSDir = "/etc/tend/client-tls"
	// ScratchDir is an emptyDir that the steps of one pod share.
	ScratchDir = "/scratch"
	// BackupDir is where a backup volume is mounted.
	BackupDir = "/backup"
	// ArchiveDir is where a continuous archive's volume is mounted.
	ArchiveDir = "/archive"
)

// Keys of a cluster's connection ConfigMap, <cluster>-connection.
const (
	// ConnectionEndpoint is the client Service's URL, for applications.
	ConnectionEndpoint = "endpoint"
	// ConnectionEndpoints are the members' client URLs, comma-separated.
	ConnectionEndpoints = "endpoints"
	// ConnectionCA is the CA that signed the members' serving
	// certificates.
	ConnectionCA = "ca.crt"
	// ConnectionClientSecret names the Secret with a client certificate.
	ConnectionClientSecret = "clientSecret"
	// ConnectionVersion is the cluster's etcd version.
	ConnectionVersion = "version"
)

// Environment variables of the S3 credentials, as the AWS SDK reads them;
// they are also the keys of the user's credentials Secret.
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
)

// Location is a backup's file as an agent container reaches it.
type Location struct {
	// URI is what status shows: s3://bucket/key or pvc://claim/path.
	URI string
	// AgentURI is what the agent is given: s3://bucket/key, or
	// file:///backup/path for a volume.
	AgentURI string
	// Args are the agent's flags for the store: endpoint, region, path
	// style. They go with --to or --from.
	Args []string
	// Env holds the S3 credentials from the user's Secret.
	Env []corev1.EnvVar
	// Volumes and Mounts bring a backup volume in.
	Volumes []corev1.Volume
	Mounts  []corev1.VolumeMount
}

// backupVolume is the name of the backup volume in a pod.
const backupVolume = "backup"

// archiveVolume is the name of a continuous archive's volume in a pod.
const archiveVolume = "archive"

// S3 is the object key in bucket loc.
func S3(loc *etcdv1alpha1.S3Location, key string) Location {
	uri := "s3://" + loc.Bucket + "/" + key
	l := Location{URI: uri, AgentURI: uri}
	if loc.Endpoint != "" {
		l.Args = append(l.Args, "--s3-endpoint="+loc.Endpoint)
	}
	if loc.Region != "" {
		l.Args = append(l.Args, "--s3-region="+loc.Region)
	}
	if loc.ForcePathStyle {
		l.Args = append(l.Args, "--s3-force-path-style")
	}
	if ref := loc.CredentialsSecretRef; ref != nil {
		from := func(key string, optional bool) corev1.EnvVar {
			return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: *ref, Key: key, Optional: &optional,
			}}}
		}
		l.Env = []corev1.EnvVar{from(EnvAccessKeyID, false), from(EnvSecretAccessKey, false), from(EnvSessionToken, true)}
	}
	return l
}

// Volume is the file at rel (relative to the volume's root) on the claim
// of loc. readOnly mounts it so, for the steps that only read.
func Volume(loc *etcdv1alpha1.VolumeLocation, rel string, readOnly bool) Location {
	return volumeAt(loc, rel, readOnly, backupVolume, BackupDir)
}

// ArchiveVolume is the folder at rel on the claim of loc, for a
// continuous archive: mounted apart from a backup's (at ArchiveDir), so
// that a restore's pod can read both.
func ArchiveVolume(loc *etcdv1alpha1.VolumeLocation, rel string, readOnly bool) Location {
	return volumeAt(loc, rel, readOnly, archiveVolume, ArchiveDir)
}

// volumeAt is the path rel on the claim of loc, in the pod volume name
// mounted at dir.
func volumeAt(loc *etcdv1alpha1.VolumeLocation, rel string, readOnly bool, name, dir string) Location {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	return Location{
		URI:      "pvc://" + loc.ClaimName + "/" + rel,
		AgentURI: "file://" + path.Join(dir, rel),
		Volumes: []corev1.Volume{{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: loc.ClaimName, ReadOnly: readOnly},
		}}},
		Mounts: []corev1.VolumeMount{{Name: name, MountPath: dir, ReadOnly: readOnly}},
	}
}

// FileName is the name of a backup's file: the backup's name with the
// extension of its compression.
func FileName(backup string, c etcdv1alpha1.Compression) string {
	switch c {
	case etcdv1alpha1.CompressionGzip:
		return backup + ".db.gz"
	case etcdv1alpha1.CompressionZstd:
		return backup + ".db.zst"
	}
	return backup + ".db"
}

// Destination is where the backup named name in namespace ns goes, when
// it is sent to dest with compression c.
func Destination(dest etcdv1alpha1.BackupDestination, ns, name string, c etcdv1alpha1.Compression) Location {
	file := FileName(name, c)
	if s3 := dest.S3; s3 != nil {
		key := s3.Key
		if key == "" {
			key = s3.Prefix + ns + "/" + file
		}
		return S3(s3, key)
	}
	return Volume(dest.Volume, path.Join(dest.Volume.Path, file), false)
}

// Source is the file of a restore source.
func Source(src etcdv1alpha1.RestoreSource) Location {
	if src.S3 != nil {
		return S3(src.S3, src.S3.Key)
	}
	return Volume(src.Volume, src.Volume.Path, true)
}

// ReadOnly is l with its volumes mounted read-only, for the steps that
// only read the file.
func (l Location) ReadOnly() Location {
	out := l
	out.Volumes = make([]corev1.Volume, len(l.Volumes))
	for i, v := range l.Volumes {
		v = *v.DeepCopy()
		if v.PersistentVolumeClaim != nil {
			v.PersistentVolumeClaim.ReadOnly = true
		}
		out.Volumes[i] = v
	}
	out.Mounts = make([]corev1.VolumeMount, len(l.Mounts))
	for i, m := range l.Mounts {
		m.ReadOnly = true
		out.Mounts[i] = m
	}
	return out
}
