package v1beta1

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	appsv1alpha1 "github.com/tend-dev/tend/api/apps/v1alpha1"
)

// The round-trip tests fill PodSets of both versions with random values
// (sigs.k8s.io/randfill, set up as apimachinery's api/apitesting/fuzzer
// does) and convert each to the other version and back. Every field must
// come back as it was, including values the apiserver would refuse, so
// that a field added to one version and forgotten in the conversion fails
// here rather than losing users' data.
//
// `go test` converts roundTrips PodSets each way, from a fresh seed, which it
// logs; -seed repeats a run. `go test -fuzz FuzzRoundTrip` fuzzes for as
// long as it is left to run, guided by coverage.

var seed = flag.Int64("seed", 0, "seed of TestRoundTrip's random PodSets; 0 picks one")

// converter is one implementation of the conversions, so that the
// round-trip checks can be shown to catch a broken one.
type converter struct {
	to   func(*PodSet, *appsv1alpha1.PodSet) error
	from func(*appsv1alpha1.PodSet, *PodSet) error
}

var realConverter = converter{
	to:   func(src *PodSet, dst *appsv1alpha1.PodSet) error { return src.ConvertTo(dst) },
	from: func(src *appsv1alpha1.PodSet, dst *PodSet) error { return dst.ConvertFrom(src) },
}

// newFiller sets up f as apimachinery's fuzzer.FuzzerFor does: ObjectMeta
// and TypeMeta as the apiserver would hold them, half the optional fields
// nil, lists of zero or one element.
func newFiller(f *randfill.Filler) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	return f.NilChance(.5).NumElements(0, 1).Funcs(metafuzzer.Funcs(codecs)...)
}

// spokeHubSpoke converts a random v1beta1 PodSet to v1alpha1 and back, and
// says how the result differs from the original.
func spokeHubSpoke(f *randfill.Filler, c converter) error {
	before := &PodSet{}
	f.Fill(before)
	input := before.DeepCopy()
	hub := &appsv1alpha1.PodSet{}
	if err := c.to(input, hub); err != nil {
		return fmt.Errorf("converting to v1alpha1: %w", err)
	}
	if !apiequality.Semantic.DeepEqual(before, input) {
		return fmt.Errorf("ConvertTo changed its input (-before +after):\n%s", cmp.Diff(before, input))
	}
	after := &PodSet{}
	if err := c.from(hub, after); err != nil {
		return fmt.Errorf("converting back from v1alpha1: %w", err)
	}
	if !apiequality.Semantic.DeepEqual(before, after) {
		return fmt.Errorf("v1beta1 → v1alpha1 → v1beta1 lost data (-before +after):\n%s", cmp.Diff(before, after))
	}
	return nil
}

// hubSpokeHub converts a random v1alpha1 PodSet to v1beta1 and back, and
// says how the result differs from the original.
func hubSpokeHub(f *randfill.Filler, c converter) error {
	before := &appsv1alpha1.PodSet{}
	f.Fill(before)
	input := before.DeepCopy()
	spoke := &PodSet{}
	if err := c.from(input, spoke); err != nil {
		return fmt.Errorf("converting to v1beta1: %w", err)
	}
	if !apiequality.Semantic.DeepEqual(before, input) {
		return fmt.Errorf("ConvertFrom changed its input (-before +after):\n%s", cmp.Diff(before, input))
	}
	after := &appsv1alpha1.PodSet{}
	if err := c.to(spoke, after); err != nil {
		return fmt.Errorf("converting back to v1alpha1: %w", err)
	}
	if !apiequality.Semantic.DeepEqual(before, after) {
		return fmt.Errorf("v1alpha1 → v1beta1 → v1alpha1 lost data (-before +after):\n%s", cmp.Diff(before, after))
	}
	return nil
}

// roundTrip runs n round trips each way and returns the first failure.
func roundTrip(f *randfill.Filler, c converter, n int) error {
	for range n {
		if err := spokeHubSpoke(f, c); err != nil {
			return err
		}
		if err := hubSpokeHub(f, c); err != nil {
			return err
		}
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("Random PodSets from -seed=%d", s)
	f := newFiller(randfill.New().RandSource(rand.NewSource(s)))
	if err := roundTrip(f, realConverter, roundTrips); err != nil {
		t.Fatalf("%v\nRepeat with: go test ./api/apps/v1beta1 -run TestRoundTrip -args -seed=%d", err, s)
	}
}

// TestRoundTripCatchesBrokenConversions shows that the round trips fail for
// conversions that are wrong in the ways conversions go wrong.
func TestRoundTripCatchesBrokenConversions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broken converter
	}{
		{name: "the annotation is not written", broken: converter{
			to: func(src *PodSet, dst *appsv1alpha1.PodSet) error {
				err := src.ConvertTo(dst)
				delete(dst.Annotations, ConversionDataAnnotation)
				return err
			},
			from: realConverter.from,
		}},
		{name: "the annotation is not stripped", broken: converter{
			to: realConverter.to,
			from: func(src *appsv1alpha1.PodSet, dst *PodSet) error {
				err := dst.ConvertFrom(src)
				if v, ok := src.Annotations[ConversionDataAnnotation]; ok {
					dst.Annotations = map[string]string{ConversionDataAnnotation: v}
				}
				return err
			},
		}},
		{name: "a status field is forgotten", broken: converter{
			to: func(src *PodSet, dst *appsv1alpha1.PodSet) error {
				err := src.ConvertTo(dst)
				dst.Status.Leader = ""
				return err
			},
			from: realConverter.from,
		}},
		{name: "the input is changed", broken: converter{
			to: realConverter.to,
			from: func(src *appsv1alpha1.PodSet, dst *PodSet) error {
				err := dst.ConvertFrom(src)
				src.Spec.Replicas = nil
				return err
			},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFiller(randfill.NewWithSeed(1))
			NewWithT(t).Expect(roundTrip(f, tc.broken, roundTrips)).To(HaveOccurred())
		})
	}
}

// FuzzRoundTrip is TestRoundTrip for `go test -fuzz FuzzRoundTrip
// ./api/apps/v1beta1`: the fuzzing engine's bytes drive the random choices,
// so coverage guides them. A plain `go test` runs the seeds below.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "leader", "\x00\x01\x02\x03\x04\x05\x06\x07", "Enabled Disabled"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := errors.Join(
			spokeHubSpoke(newFiller(randfill.NewFromGoFuzz(data)), realConverter),
			hubSpokeHub(newFiller(randfill.NewFromGoFuzz(data)), realConverter),
		)
		if err != nil {
			t.Fatal(err)
		}
	})
}
