package topology

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// PanicError is a panic recovered from user code: a spout's or bolt's
// method, a Basic function, or Config.DeadLetter. A tuple whose Execute
// panicked fails with ackcore.ReasonPanic and this as Failure.Err.
type PanicError struct {
	Component string // the component whose code panicked
	Task      int    // its global task id
	Method    string // "Open", "Next", "Ack", "Fail", "Close", "Execute", "DeadLetter"
	Value     any    // the value passed to panic
	Stack     []byte // the panicking goroutine's stack (runtime/debug.Stack)
	kind      string // "spout" or "bolt"
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("topology: %s %q task %d: panic in %s: %v", e.kind, e.Component, e.Task, e.Method, e.Value)
}

// panicLogEvery is the least time between two log lines for one
// component's panics: a bolt that panics on every tuple logs once per
// interval (the first panic with its stack, then a count), not per
// tuple.
const panicLogEvery = 10 * time.Second

// panicLog rate-limits one component's panic log lines (any of its
// executors' goroutines).
type panicLog struct {
	mu         sync.Mutex
	last       int64 // engine clock, ns, of the last line; 0: none yet
	suppressed int
}

// recovered builds the PanicError for value v recovered on executor e,
// counts it, logs it (rate-limited) and, with Config.PanicStops, stops
// the topology with it. Called in the deferred function that recovered,
// so the stack is the panic's.
func (e *executor) recovered(task int, method string, v any) *PanicError {
	pe := &PanicError{Component: e.comp.name, Task: task, Method: method, Value: v, Stack: debug.Stack(), kind: e.comp.kind()}
	e.m.Panics++
	e.top.logPanic(e.comp, pe, int64(e.top.cfg.Clock.Now()))
	if e.top.cfg.PanicStops {
		e.top.halt(pe)
	}
	return pe
}

func (t *Topology) logPanic(c *component, pe *PanicError, now int64) {
	pl := &c.panics
	pl.mu.Lock()
	if pl.last != 0 && now-pl.last < int64(panicLogEvery) && now >= pl.last {
		pl.suppressed++
		pl.mu.Unlock()
		return
	}
	n := pl.suppressed
	pl.last, pl.suppressed = max(now, 1), 0
	pl.mu.Unlock()
	t.logger().Error("topology: panic in user code, recovered", "component", pe.Component, "task", pe.Task,
		"method", pe.Method, "value", fmt.Sprint(pe.Value), "more_since_last", n, "stack", string(pe.Stack))
}

func (t *Topology) logger() *slog.Logger {
	if t.cfg.Logger != nil {
		return t.cfg.Logger
	}
	return slog.Default()
}

// callSafe runs f, user code, and returns the panic it recovered, if any
// (for the calls outside an executor's loop: Open and Close).
func callSafe(comp *component, task int, method string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Component: comp.name, Task: task, Method: method, Value: v, Stack: debug.Stack(), kind: comp.kind()}
		}
	}()
	return f()
}
