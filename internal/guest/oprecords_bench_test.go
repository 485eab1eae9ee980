package guest

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkToolOpRecords is the guest's half of a journalled bash call:
// the same call with and without an op id, interleaved, against an
// in-process guest — on this boot (records without fsync) and with the
// boot id unreadable (every record fsynced, as before ops/boot).
//
//	go test -run '^$' -bench ToolOpRecords -benchtime 300x ./internal/guest/
func BenchmarkToolOpRecords(b *testing.B) {
	for _, mode := range []struct{ name, bootIDPath string }{
		{"this-boot", bootIDPath}, {"boot-unknown", "/nonexistent/boot_id"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			defer func(p string) { bootIDPath = p }(bootIDPath)
			bootIDPath = mode.bootIDPath
			c, _ := startGuest(b, nil)
			ctx := context.Background()
			in := json.RawMessage(`{"command":"echo x"}`)
			call := func(op string) {
				if _, err := c.RunTool(ctx, "bash", ToolRequest{Input: in, OpID: op}); err != nil {
					b.Fatal(err)
				}
			}
			call("")
			var plain, journalled time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				call("")
				t1 := time.Now()
				call(testOpID(i))
				plain += t1.Sub(t0)
				journalled += time.Since(t1)
			}
			b.ReportMetric(float64(plain.Microseconds())/float64(b.N), "µs/call-plain")
			b.ReportMetric(float64(journalled.Microseconds())/float64(b.N), "µs/call-journalled")
			b.ReportMetric(float64(journalled)/float64(plain), "ratio")
		})
	}
}
