//go:build e2e

package chaos

import (
	"bytes"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-dev/tend/test/e2e/framework"
)

// The suite's settings. Pass them after -args.
var (
	flagKills = flag.Int("chaos.kills", 50,
		"manager kills during PodSet scaling; the etcd scenarios run twice a fifth of it (at least 1), the leader scenario a fifth (at most 5)")
	flagShort = flag.Bool("chaos.short", false,
		"CI's reduced form: few kills, a small fuzz and short observation windows; -chaos.kills is ignored")
	flagSeed = flag.Uint64("chaos.seed", 0,
		"the seed of every random choice (kill points, fuzzed specs); 0 picks one from the clock, printed with the table")
	flagFuzz = flag.Int("chaos.fuzz", 60,
		"fuzzed objects per kind")
	flagTable = flag.String("chaos.table", "",
		"also write the table to this file")
)

// cluster is the local cluster, set up once for all the package's tests.
var cluster = framework.New()

var (
	seed    uint64
	rngMu   sync.Mutex
	sources = map[string]*rand.Rand{}
)

// random returns t's own random source, seeded from the run's seed and t's
// name: a scenario's draws repeat with the seed, whatever ran before it or
// runs beside it (the etcd scenarios run three at a time). The source is
// t's alone; only t's goroutine draws from it.
func random(t *testing.T) *rand.Rand {
	rngMu.Lock()
	defer rngMu.Unlock()
	if r, ok := sources[t.Name()]; ok {
		return r
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(t.Name()))
	s := seed ^ h.Sum64()
	r := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	sources[t.Name()] = r
	return r
}

// kills is the number of manager kills for PodSet scaling, and scaled is a
// fifth of it for the slower etcd scenarios.
func kills() int {
	if *flagShort {
		return 2
	}
	return max(*flagKills, 1)
}

func scaled() int {
	if *flagShort {
		return 1
	}
	return max(*flagKills/5, 1)
}

func fuzzPerKind() int {
	if *flagShort {
		return 12
	}
	return max(*flagFuzz, 1)
}

func TestMain(m *testing.M) {
	flag.Parse()
	seed = *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	code := cluster.Run(m)
	var b bytes.Buffer
	var args []string
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-chaos.") || strings.HasPrefix(a, "-test.run") {
			args = append(args, a)
		}
	}
	header := fmt.Sprintf("Tend chaos suite, %s UTC, %s; seed %d; flags %q; exit code %d",
		start.UTC().Format("2006-01-02 15:04"), time.Since(start).Round(time.Second), seed, args, code)
	writeTable(&b, header)
	fmt.Fprint(os.Stdout, "\n"+b.String())
	if *flagTable != "" {
		if err := os.MkdirAll(filepath.Dir(*flagTable), 0o755); err == nil {
			_ = os.WriteFile(*flagTable, b.Bytes(), 0o644)
		}
	}
	os.Exit(code)
}

// scenario registers the row of test t, stamps its time and result when t
// ends, and returns it.
func scenario(t *testing.T, name string) *row {
	r := newRow(name)
	record(r)
	start := time.Now()
	t.Cleanup(func() {
		r.Duration = time.Since(start)
		switch {
		case t.Failed():
			r.Result = "FAIL"
		case t.Skipped():
		default:
			r.Result = "PASS"
		}
	})
	t.Logf("Seed %d", seed)
	return r
}
