package topology

import "fmt"

// SpoutCollector is how a spout task emits. It is valid only inside Next
// (and Open), on the executor's goroutine.
type SpoutCollector struct {
	s    *spoutExec
	task int // local task
}

// Emit emits values on the default stream. With a non-nil msgID the tuple
// starts a tracked root: its outcome comes back to the spout's Ack or
// Fail with that msgID, and the engine keeps values (do not modify them)
// to replay it. With a nil msgID the tuple is not tracked.
func (c *SpoutCollector) Emit(msgID any, values ...any) error {
	return c.On(DefaultStream).Emit(msgID, values...)
}

// On returns an emitter for the named stream.
func (c *SpoutCollector) On(stream string) SpoutStream { return SpoutStream{c: c, name: stream} }

// Done tells the engine this task will emit nothing more: Next is not
// called again. Once every spout task is done and nothing is pending,
// Topology.Done is closed.
func (c *SpoutCollector) Done() {
	if !c.s.done[c.task] {
		c.s.done[c.task] = true
		c.s.ndone++
	}
}

// Task is the global id of the task being asked.
func (c *SpoutCollector) Task() int { return c.s.tasks[c.task] }

// SpoutStream emits on one stream; see SpoutCollector.Emit.
type SpoutStream struct {
	c    *SpoutCollector
	name string
}

func (o SpoutStream) stream() (*stream, error) {
	return o.c.s.comp.emitStream(o.name)
}

// Emit emits values on the stream; see SpoutCollector.Emit.
func (o SpoutStream) Emit(msgID any, values ...any) error {
	st, err := o.stream()
	if err != nil {
		return err
	}
	return o.c.s.emit(o.c.task, st, -1, msgID, values)
}

// EmitDirect emits values to one task of a direct stream's subscriber.
func (o SpoutStream) EmitDirect(task int, msgID any, values ...any) error {
	st, err := o.stream()
	if err != nil {
		return err
	}
	if task < 0 {
		return fmt.Errorf("topology: spout %q: EmitDirect to task %d", o.c.s.comp.name, task)
	}
	return o.c.s.emit(o.c.task, st, task, msgID, values)
}

// BoltCollector is how a bolt task emits, acks and fails. It is valid only
// inside Execute (and Open), on the executor's goroutine.
type BoltCollector struct {
	b    *boltExec
	task int // global id of the task executing
}

// Emit emits values on the default stream anchored to anchor: the new
// tuple joins anchor's trees, which do not complete until it is acked. A
// nil anchor emits an unanchored tuple (not tracked).
func (c *BoltCollector) Emit(anchor *Tuple, values ...any) error {
	return c.On(DefaultStream).Emit(anchor, values...)
}

// EmitMulti emits values on the default stream anchored to every one of
// anchors (multi-anchoring): the tuple joins all their trees, and failing
// it fails them all.
func (c *BoltCollector) EmitMulti(anchors []*Tuple, values ...any) error {
	return c.On(DefaultStream).EmitMulti(anchors, values...)
}

// On returns an emitter for the named stream.
func (c *BoltCollector) On(stream string) BoltStream { return BoltStream{c: c, name: stream} }

// Ack acks t: its part of every tree it belongs to is done. Acking or
// failing a tuple a second time returns an error naming it and sends
// nothing; so does a tuple delivered to another executor (or nil), as it
// does for Emit's anchor: it is that executor's to ack.
func (c *BoltCollector) Ack(t *Tuple) error { return c.b.ack(t) }

// Fail fails t and with it every tree it belongs to, at once (the spouts
// need not wait for the timeout); err reaches the spout's Failure.Err and
// the dead-letter hook. Errors as Ack does.
func (c *BoltCollector) Fail(t *Tuple, err error) error { return c.b.fail(t, err) }

// Reset restarts the timeout of t's trees, for long work in progress; a
// tree's deadline never moves past its emit time plus Config.ResetCap.
func (c *BoltCollector) Reset(t *Tuple) { c.b.reset(t) }

// Task is the global id of the task executing.
func (c *BoltCollector) Task() int { return c.task }

// BoltStream emits on one stream; see BoltCollector.Emit.
type BoltStream struct {
	c    *BoltCollector
	name string
}

func (o BoltStream) stream() (*stream, error) {
	return o.c.b.comp.emitStream(o.name)
}

// Emit emits values anchored to anchor (nil: unanchored).
func (o BoltStream) Emit(anchor *Tuple, values ...any) error {
	st, err := o.stream()
	if err != nil {
		return err
	}
	return o.c.b.emit(st, -1, anchor, nil, values)
}

// EmitMulti emits values anchored to every one of anchors.
func (o BoltStream) EmitMulti(anchors []*Tuple, values ...any) error {
	st, err := o.stream()
	if err != nil {
		return err
	}
	return o.c.b.emit(st, -1, nil, anchors, values)
}

// EmitDirect emits values to one task of a direct stream's subscriber,
// anchored to anchor (nil: unanchored).
func (o BoltStream) EmitDirect(task int, anchor *Tuple, values ...any) error {
	st, err := o.stream()
	if err != nil {
		return err
	}
	if task < 0 {
		return fmt.Errorf("topology: bolt %q: EmitDirect to task %d", o.c.b.comp.name, task)
	}
	return o.c.b.emit(st, task, anchor, nil, values)
}

// BasicCollector is a basic bolt's collector: every emit is anchored to the
// input being executed.
type BasicCollector struct {
	c  *BoltCollector
	in *Tuple
}

// Emit emits values on the default stream, anchored to the input.
func (c *BasicCollector) Emit(values ...any) error { return c.c.Emit(c.in, values...) }

// On returns an emitter for the named stream, anchored to the input.
func (c *BasicCollector) On(stream string) BasicStream {
	return BasicStream{o: c.c.On(stream), in: c.in}
}

// Reset restarts the timeout of the input's trees (see BoltCollector.Reset).
func (c *BasicCollector) Reset() { c.c.Reset(c.in) }

// Task is the global id of the task executing.
func (c *BasicCollector) Task() int { return c.c.task }

// BasicStream emits on one stream, anchored to the input.
type BasicStream struct {
	o  BoltStream
	in *Tuple
}

// Emit emits values anchored to the input.
func (o BasicStream) Emit(values ...any) error { return o.o.Emit(o.in, values...) }

// EmitDirect emits values to one task of a direct stream's subscriber,
// anchored to the input.
func (o BasicStream) EmitDirect(task int, values ...any) error {
	return o.o.EmitDirect(task, o.in, values...)
}
