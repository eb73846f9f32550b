package bench

import (
	"testing"
	"time"
)

func TestSplitTraces(t *testing.T) {
	out := `File: agentfy-dev
Type: cpu
Duration: 15.04s, Total samples = 4.61s (30.65%)
-----------+-------------------------------------------------------
      20ms   internal/runtime/syscall/linux.Syscall6
             syscall.write
             github.com/agentfy/agentfy/view.(*Service).View
             github.com/agentfy/agentfy/api.(*Server).traceView
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      10ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
     1.5s   github.com/nats-io/nats%2ego.(*Conn).readLoop
-----------+-------------------------------------------------------
      30ms   bufio.(*Reader).fill
             net/http.(*conn).serve
-----------+-------------------------------------------------------
      10ms   runtime.nanotime1
             runtime.sysmon
-----------+-------------------------------------------------------
`
	cpu, sys := map[string]time.Duration{}, map[string]time.Duration{}
	splitTraces(out, replicaParts, cpu, sys)
	want := map[string]time.Duration{
		replicaParts[3].name: 20 * time.Millisecond, // the view route, not the HTTP server
		replicaParts[0].name: 10 * time.Millisecond,
		replicaParts[6].name: 1500 * time.Millisecond,
		replicaParts[7].name: 30 * time.Millisecond,
		otherPart:            10 * time.Millisecond,
	}
	if len(cpu) != len(want) {
		t.Fatalf("parts = %v, want %v", cpu, want)
	}
	for name, d := range want {
		if cpu[name] != d {
			t.Errorf("%s = %v, want %v", name, cpu[name], d)
		}
	}
	if len(sys) != 1 || sys[replicaParts[3].name] != 20*time.Millisecond {
		t.Errorf("system calls = %v, want the view route's 20ms", sys)
	}
}
