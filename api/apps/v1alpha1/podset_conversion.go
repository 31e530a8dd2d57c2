package v1alpha1

// Hub marks v1alpha1 as the version that every other version of PodSet
// converts to and from (controller-runtime's hub and spoke). It is also the
// storage version; api/apps/v1beta1 holds the conversions.
func (*PodSet) Hub() {}
