package manager

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MemoryLimitEnv names the variable that carries the container's memory
// limit in bytes; the manager's Deployment fills it from the Downward API
// (resourceFieldRef limits.memory).
const MemoryLimitEnv = "MEMORY_LIMIT"

// softMemoryLimit is the Go runtime's soft memory limit the manager sets,
// in bytes, or 0 when it sets none, and why. The runtime's own GOMEMLIMIT
// wins; without it the limit is percent of the container's limit. A
// manager whose heap swings (a cache of 100,000 pods growing, lists being
// decoded) then collects garbage harder as it nears the limit rather than
// letting the heap double its live size (GOGC's 100) into the kernel's OOM
// killer. Its live data above the limit still grows: the limit is soft.
func softMemoryLimit(percent int, getenv func(string) string) (int64, string, error) {
	if percent < 0 || percent > 100 {
		return 0, "", fmt.Errorf("--soft-memory-limit-percent=%d: want 0 (none) to 100", percent)
	}
	if v := getenv("GOMEMLIMIT"); v != "" {
		return 0, "GOMEMLIMIT=" + v + " is set and the runtime follows it", nil
	}
	if percent == 0 {
		return 0, "--soft-memory-limit-percent is 0", nil
	}
	raw := strings.TrimSpace(getenv(MemoryLimitEnv))
	if raw == "" {
		return 0, MemoryLimitEnv + " is not set (the container's limit is unknown)", nil
	}
	limit, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || limit <= 0 {
		return 0, "", fmt.Errorf("%s=%q: want the container's memory limit in bytes, as the Downward API's resourceFieldRef limits.memory gives it", MemoryLimitEnv, raw)
	}
	soft := int64(math.Floor(float64(limit) * float64(percent) / 100))
	return soft, fmt.Sprintf("%d%% of the container's memory limit of %d bytes (%s)", percent, limit, MemoryLimitEnv), nil
}
