package webhook

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// converted are the kinds that have more than one version, each by its hub
// (storage) version and its CRD's name.
var converted = []struct {
	hub client.Object
	crd string
}{
	{hub: &appsv1alpha1.PodSet{}, crd: "podsets.apps.tend.dev"},
}

// CRDNames returns the names of the CRDs whose versions the webhook
// converts: the CRDs whose conversion webhook needs the CA.
func CRDNames() []string {
	names := make([]string, 0, len(converted))
	for _, c := range converted {
		names = append(names, c.crd)
	}
	return names
}

// setupConversion registers the conversion webhook, at /convert, for every
// kind that has more than one version. A kind whose versions are not all
// registered in the manager's scheme is an error, not a webhook that
// silently converts nothing.
func setupConversion(mgr ctrl.Manager) error {
	for _, c := range converted {
		ok, err := conversion.IsConvertible(mgr.GetScheme(), c.hub)
		if err != nil {
			return fmt.Errorf("checking that %T converts: %w", c.hub, err)
		}
		if !ok {
			return fmt.Errorf("%T is not convertible in the manager's scheme: is its other version registered?", c.hub)
		}
		if err := ctrl.NewWebhookManagedBy(mgr, c.hub).Complete(); err != nil {
			return fmt.Errorf("registering the conversion webhook of %s: %w", c.crd, err)
		}
	}
	return nil
}
