package timerwheel_test

import (
	"fmt"

	"github.com/xorack/xorack/internal/timerwheel"
)

// Timers expire in order of deadline, equal deadlines in the order they were scheduled, and a cancelled one never.
func ExampleWheel_Expire() {
	w := timerwheel.New(8, 0) // handles 0..7; time starts at tick 0
	w.Schedule(3, 100)
	w.Schedule(1, 40)
	w.Schedule(5, 100) // same deadline as handle 3: expires after it
	w.Schedule(2, 70)
	w.Cancel(2)

	for {
		h, deadline, ok := w.ExpireDeadline(100) // everything due at tick 100
		if !ok {
			break
		}
		fmt.Printf("tick %d: handle %d\n", deadline, h)
	}
	fmt.Println("now", w.Now(), "pending", w.Len())
	// Output:
	// tick 40: handle 1
	// tick 100: handle 3
	// tick 100: handle 5
	// now 100 pending 0
}

// A driver advances the wheel on each coarse tick; a periodic timer re-arms itself from its own deadline.
func ExampleWheel_Advance() {
	const heartbeat, session = 0, 1 // handles: indexes of the caller's objects
	w := timerwheel.New(2, 0)
	w.Schedule(heartbeat, 25)
	w.Schedule(session, 60)

	for now := timerwheel.Tick(0); now <= 100; now += 20 { // late by up to 19 ticks
		w.Advance(now, func(h timerwheel.Handle) {
			fmt.Printf("at %d: handle %d due at %d\n", now, h, w.Now())
			if h == heartbeat {
				w.Schedule(h, w.Now()+25) // Now is the fired deadline: no drift
			}
		})
	}
	// Output:
	// at 40: handle 0 due at 25
	// at 60: handle 0 due at 50
	// at 60: handle 1 due at 60
	// at 80: handle 0 due at 75
	// at 100: handle 0 due at 100
}
