//go:build e2e

package chaos

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fuzzer fills the fields of Tend's API types with random values, valid
// and invalid alike: negative and huge numbers, bad enums, bad durations,
// cron strings and versions, long names. It walks the Go types by
// reflection, so a field added to a type is fuzzed without a change here.
// Fields of Kubernetes' own types (a pod template, resources, affinity) are
// left as the base object has them: the apiserver validates those, not
// Tend.
type fuzzer struct {
	rng *rand.Rand
	// p is the chance that a field is changed.
	p float64
}

var (
	fuzzStrings = []string{
		"", "x", "Delete", "Retain", "Snapshot", "Auto", "Manual", "Provided", "None", "Gzip", "Zstd", "Adopt", "AdoptOrCreate",
		"Bogus", "periodic", "revision", "v3.6.16", "v3.5.21", "v3.99.0", "v2", "3.6", "30s", "-5s", "1h", "1Gi",
		"abc!@#", "*/5 * * * *", "not a cron", "99 99 * * *", "@hourly", "@every 1s", "Mars/Olympus", "UTC", "Europe/Paris",
		"https://example.invalid", "ftp://x", "arn:aws:sqs:us-east-1:000000000000:dlq", "../../etc", "/a/b",
		"kv", "queue.fifo", "tend.dev/x", "aws:tag", strings.Repeat("a", 300), strings.Repeat("b", 70000),
	}
	fuzzInts      = []int64{-1, 0, 1, 3, 9, 10, 30, 100, 1000, 900, 43200, 1209600, math.MaxInt32, math.MinInt32}
	fuzzDurations = []time.Duration{-time.Second, 0, time.Second, 10 * time.Second, 45 * time.Second, 5 * time.Minute, 1000000 * time.Hour}
	fuzzQuantity  = []string{"-1", "0", "1", "100m", "1Gi", "1Ei", "64Mi"}
	fuzzJSON      = []string{`{}`, `{"Version":"2012-10-17"}`, `[1,2]`, `"s"`, `{"a":{"b":[null]}}`}

	durationType = reflect.TypeFor[metav1.Duration]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
	jsonType     = reflect.TypeFor[apiextensionsv1.JSON]()
)

// fill changes v's fields at random; v is a pointer to a spec.
func (f *fuzzer) fill(v any) {
	f.value(reflect.ValueOf(v).Elem(), 0, true)
}

func (f *fuzzer) value(v reflect.Value, depth int, force bool) {
	if depth > 6 || !v.CanSet() {
		return
	}
	t := v.Type()
	switch {
	case t == durationType:
		if force || f.hit() {
			v.Set(reflect.ValueOf(metav1.Duration{Duration: pick(f.rng, fuzzDurations)}))
		}
		return
	case t == quantityType:
		if force || f.hit() {
			v.Set(reflect.ValueOf(resource.MustParse(pick(f.rng, fuzzQuantity))))
		}
		return
	case t == jsonType:
		if force || f.hit() {
			v.Set(reflect.ValueOf(apiextensionsv1.JSON{Raw: []byte(pick(f.rng, fuzzJSON))}))
		}
		return
	case t == timeType:
		return
	case t.PkgPath() != "" && strings.HasPrefix(t.PkgPath(), "k8s.io/api/") && t.Name() != "LocalObjectReference":
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				f.value(v.Field(i), depth+1, false)
			}
		}
	case reflect.Pointer:
		if !force && !f.hit() {
			// Walk into what is there, without changing whether it is.
			if !v.IsNil() {
				f.value(v.Elem(), depth+1, false)
			}
			return
		}
		if f.rng.IntN(4) == 0 {
			v.Set(reflect.Zero(t))
			return
		}
		n := reflect.New(t.Elem())
		f.value(n.Elem(), depth+1, true)
		v.Set(n)
	case reflect.String:
		if force || f.hit() {
			s := pick(f.rng, fuzzStrings)
			if f.rng.IntN(5) == 0 {
				s = randomWord(f.rng)
			}
			v.SetString(s)
		}
	case reflect.Int32, reflect.Int64, reflect.Int:
		if force || f.hit() {
			n := pick(f.rng, fuzzInts)
			if f.rng.IntN(4) == 0 {
				n = f.rng.Int64N(20) - 5
			}
			if t.Kind() == reflect.Int32 {
				n = max(min(n, math.MaxInt32), math.MinInt32)
			}
			v.SetInt(n)
		}
	case reflect.Bool:
		if force || f.hit() {
			v.SetBool(f.rng.IntN(2) == 0)
		}
	case reflect.Map:
		if (force || f.hit()) && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			m := reflect.MakeMap(t)
			for range f.rng.IntN(3) {
				k := pick(f.rng, fuzzStrings)
				if f.rng.IntN(2) == 0 {
					k = randomWord(f.rng)
				}
				m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), reflect.ValueOf(randomWord(f.rng)).Convert(t.Elem()))
			}
			v.Set(m)
		}
	case reflect.Slice:
		if (force || f.hit()) && t.Elem().Kind() == reflect.String {
			s := reflect.MakeSlice(t, 0, 2)
			for range f.rng.IntN(3) {
				s = reflect.Append(s, reflect.ValueOf(pick(f.rng, fuzzStrings)).Convert(t.Elem()))
			}
			v.Set(s)
		}
	}
}

func (f *fuzzer) hit() bool { return f.rng.Float64() < f.p }

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

func randomWord(rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 1+rng.IntN(20))
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return string(b)
}

// fuzzName is a random object name: mostly valid, sometimes too long, with
// capitals, or otherwise not a DNS name.
func fuzzName(rng *rand.Rand, i int) string {
	switch rng.IntN(10) {
	case 0:
		return fmt.Sprintf("f%d-%s", i, strings.Repeat("n", 250))
	case 1:
		return fmt.Sprintf("F%d-Upper", i)
	case 2:
		return fmt.Sprintf("f%d_under.score", i)
	case 3:
		return fmt.Sprintf("f%d-%s", i, strings.Repeat("m", 60))
	}
	return fmt.Sprintf("f%d-%s", i, strings.Trim(randomWord(rng), "-"))
}
