package podspec

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// UID and GID that Tend's pods run as: the images' non-root user.
const (
	UID = 65532
	GID = 65532
)

// PodSecurity and ContainerSecurity meet the restricted Pod Security
// Standard: non-root, no privilege escalation, no capabilities, the
// runtime's seccomp profile, and a read-only root filesystem.
func PodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](UID),
		RunAsGroup:     ptr.To[int64](GID),
		FSGroup:        ptr.To[int64](GID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurity: see PodSecurity.
func ContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
