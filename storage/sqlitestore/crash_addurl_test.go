package sqlitestore

import (
	"fmt"
	"testing"
)

// TestCrashResumeAddURL is TestCrashResume with the crawler adding links
// the way Colly programs do, q.AddURL from OnHTML (MAGPIE_CRASH_ADDURL):
// those links are buffered and stored with the page's batch, and kill -9
// at any point must lose none of them (every page fetched, every item
// written, a page fetched twice only if it was in flight at a kill).
func TestCrashResumeAddURL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills crawler processes")
	}
	t.Setenv("MAGPIE_CRASH_ADDURL", "1")
	for _, kills := range [][]int{{150, 700}, {1, 900, 300}} {
		t.Run(fmt.Sprint(kills), func(t *testing.T) { crashResume(t, kills) })
	}
}
