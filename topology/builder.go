package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// DefaultStream is the stream Output declares and Emit uses.
const DefaultStream = "default"

// Builder declares a topology: spouts and bolts by name, their
// parallelism, their output streams and what each bolt subscribes to.
// Declaration methods chain; every mistake is reported by Build, with the
// part it concerns named.
type Builder struct {
	decls []*Decl
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{} }

// Decl declares one component; its methods chain.
type Decl struct {
	name      string
	spout     bool
	newSpout  func() Spout
	newBolt   func() Bolt
	executors int
	tasks     int
	streams   []streamDecl
	inputs    []inputDecl
	errs      []error
}

type streamDecl struct {
	name   string
	fields []string
	direct bool
}

type inputDecl struct {
	from, stream string
	g            Grouping
}

// Spout declares a spout; newSpout is called once per task.
func (b *Builder) Spout(name string, newSpout func() Spout) *Decl {
	d := &Decl{name: name, spout: true, newSpout: newSpout}
	if newSpout == nil {
		d.errf("nil constructor")
	}
	b.decls = append(b.decls, d)
	return d
}

// Bolt declares a bolt; newBolt is called once per task.
func (b *Builder) Bolt(name string, newBolt func() Bolt) *Decl {
	d := &Decl{name: name, newBolt: newBolt}
	if newBolt == nil {
		d.errf("nil constructor")
	}
	b.decls = append(b.decls, d)
	return d
}

func (d *Decl) kind() string {
	if d.spout {
		return "spout"
	}
	return "bolt"
}

func (d *Decl) errf(format string, args ...any) {
	d.errs = append(d.errs, fmt.Errorf("topology: %s %q: %s", d.kind(), d.name, fmt.Sprintf(format, args...)))
}

// Executors sets the number of executor goroutines (Storm's parallelism
// hint); default the number of tasks (1 when neither is set): the
// parallelism named with Tasks alone runs in parallel, as in Storm.
// Fewer executors than tasks run several tasks on one goroutine each.
func (d *Decl) Executors(n int) *Decl {
	if n < 1 || n > 1<<12 {
		d.errf("executors %d out of range [1, %d]", n, 1<<12)
	}
	d.executors = n
	return d
}

// Tasks sets the number of tasks (instances), spread evenly over the
// executors; default the number of executors. Tasks(4) alone runs 4
// executors, one task each.
func (d *Decl) Tasks(n int) *Decl {
	if n < 1 || n > 1<<16 {
		d.errf("tasks %d out of range [1, %d]", n, 1<<16)
	}
	d.tasks = n
	return d
}

// Output declares the default stream's fields.
func (d *Decl) Output(fields ...string) *Decl { return d.Stream(DefaultStream, fields...) }

// Stream declares a named output stream and its fields.
func (d *Decl) Stream(name string, fields ...string) *Decl {
	d.streams = append(d.streams, streamDecl{name: name, fields: fields})
	return d
}

// DirectStream declares a named output stream whose tuples the emitter
// addresses to a task (EmitDirect); its subscribers use Direct().
func (d *Decl) DirectStream(name string, fields ...string) *Decl {
	d.streams = append(d.streams, streamDecl{name: name, fields: fields, direct: true})
	return d
}

// Input subscribes a bolt to from's default stream.
func (d *Decl) Input(from string, g Grouping) *Decl {
	return d.InputStream(from, DefaultStream, g)
}

// InputStream subscribes a bolt to a named stream of from.
func (d *Decl) InputStream(from, stream string, g Grouping) *Decl {
	if d.spout {
		d.errf("a spout cannot subscribe to %q", from)
	}
	d.inputs = append(d.inputs, inputDecl{from: from, stream: stream, g: g})
	return d
}

// Grouping says which task of a subscribing bolt receives each tuple.
type Grouping struct {
	kind   groupKind
	fields []string
}

type groupKind uint8

const (
	groupShuffle groupKind = iota + 1
	groupFields
	groupAll
	groupGlobal
	groupDirect
	groupLocal
)

func (g Grouping) String() string {
	switch g.kind {
	case groupShuffle:
		return "shuffle"
	case groupFields:
		return "fields(" + strings.Join(g.fields, ",") + ")"
	case groupAll:
		return "all"
	case groupGlobal:
		return "global"
	case groupDirect:
		return "direct"
	case groupLocal:
		return "local-or-shuffle"
	}
	return "invalid grouping"
}

// Shuffle spreads tuples evenly over the tasks (round robin from a
// per-emitter start).
func Shuffle() Grouping { return Grouping{kind: groupShuffle} }

// Fields sends tuples with equal values in the named fields to the same
// task (a hash of the values).
func Fields(names ...string) Grouping {
	return Grouping{kind: groupFields, fields: slices.Clone(names)}
}

// All sends every tuple to every task.
func All() Grouping { return Grouping{kind: groupAll} }

// Global sends every tuple to the task with the lowest id.
func Global() Grouping { return Grouping{kind: groupGlobal} }

// Direct lets the emitter choose the task (EmitDirect); the stream must be
// declared with DirectStream.
func Direct() Grouping { return Grouping{kind: groupDirect} }

// LocalOrShuffle prefers the tasks of the subscriber's executor paired
// with the emitting one (emitter executor i sends to subscriber executor
// i mod n), so that a chain of equal parallelism keeps each tuple on one
// ring between the same two goroutines; it is Shuffle over those tasks.
// This is the in-process counterpart of Storm's preference for tasks in
// the same worker.
func LocalOrShuffle() Grouping { return Grouping{kind: groupLocal} }

// Build checks the declarations and builds the topology (Start runs it).
// Every problem found is in the error, each naming its component, stream
// or field.
func (b *Builder) Build(cfg Config) (*Topology, error) {
	cfg, cfgErr := cfg.validate()
	comps, err := b.check()
	if err := errors.Join(cfgErr, err); err != nil {
		return nil, err
	}
	t, err := newTopology(cfg, comps)
	if err != nil {
		return nil, err
	}
	if t.inProcess() {
		// The acker's own check needs the port shape, which needs the
		// executors: it comes once the rest is valid.
		if t.ackerCfg, err = t.ackerConfig(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// check validates the declarations and resolves them into components in
// topological order.
func (b *Builder) check() ([]*component, error) {
	var errs []error
	byName := map[string]*component{}
	var comps []*component
	for _, d := range b.decls {
		errs = append(errs, d.errs...)
		switch {
		case d.name == "":
			errs = append(errs, fmt.Errorf("topology: a %s has an empty name", d.kind()))
			continue
		case byName[d.name] != nil:
			errs = append(errs, fmt.Errorf("topology: duplicate component name %q", d.name))
			continue
		}
		tasks, executors := d.tasks, d.executors
		switch {
		case tasks == 0 && executors == 0:
			tasks, executors = 1, 1
		case tasks == 0:
			tasks = executors
		case executors == 0:
			executors = tasks
		}
		if executors > tasks {
			errs = append(errs, fmt.Errorf("topology: %s %q: executors %d exceed tasks %d", d.kind(), d.name, executors, tasks))
		}
		c := &component{name: d.name, spout: d.spout, newSpout: d.newSpout, newBolt: d.newBolt,
			nexec: executors, ntasks: tasks, decl: d}
		seen := map[string]bool{}
		for _, s := range d.streams {
			if s.name == "" {
				errs = append(errs, fmt.Errorf("topology: %s %q declares a stream with an empty name", d.kind(), d.name))
				continue
			}
			if seen[s.name] {
				errs = append(errs, fmt.Errorf("topology: %s %q declares stream %q twice", d.kind(), d.name, s.name))
				continue
			}
			seen[s.name] = true
			fseen := map[string]bool{}
			for _, f := range s.fields {
				if f == "" || fseen[f] {
					errs = append(errs, fmt.Errorf("topology: %s %q stream %q: field name %q empty or repeated", d.kind(), d.name, s.name, f))
				}
				fseen[f] = true
			}
			c.streams = append(c.streams, &stream{comp: c, name: s.name, fields: slices.Clone(s.fields), direct: s.direct, index: len(c.streams)})
		}
		byName[d.name] = c
		comps = append(comps, c)
	}
	spouts := 0
	for _, c := range comps {
		if c.spout {
			spouts++
			continue
		}
		if len(c.decl.inputs) == 0 {
			errs = append(errs, fmt.Errorf("topology: bolt %q has no inputs", c.name))
		}
		for _, in := range c.decl.inputs {
			from := byName[in.from]
			if from == nil {
				errs = append(errs, fmt.Errorf("topology: bolt %q subscribes to unknown component %q", c.name, in.from))
				continue
			}
			st := from.stream(in.stream)
			if st == nil {
				errs = append(errs, fmt.Errorf("topology: bolt %q subscribes to stream %q of %q, which declares no such stream (it declares: %s)",
					c.name, in.stream, in.from, from.streamNames()))
				continue
			}
			sub := &subscription{from: st, to: c, g: in.g}
			where := fmt.Sprintf("bolt %q input %s:%s", c.name, in.from, in.stream)
			switch in.g.kind {
			case 0:
				errs = append(errs, fmt.Errorf("topology: %s: no grouping (use Shuffle(), Fields(...), ...)", where))
				continue
			case groupFields:
				if len(in.g.fields) == 0 {
					errs = append(errs, fmt.Errorf("topology: %s: fields grouping names no field", where))
				}
				for _, f := range in.g.fields {
					i := slices.Index(st.fields, f)
					if i < 0 {
						errs = append(errs, fmt.Errorf("topology: %s: fields grouping on %q, which the stream does not declare (it declares %q)", where, f, st.fields))
					}
					sub.fieldIdx = append(sub.fieldIdx, i)
				}
			case groupDirect:
				if !st.direct {
					errs = append(errs, fmt.Errorf("topology: %s: direct grouping on a stream not declared with DirectStream", where))
				}
			}
			if st.direct && in.g.kind != groupDirect {
				errs = append(errs, fmt.Errorf("topology: %s: %v grouping on a direct stream (use Direct())", where, in.g))
			}
			for _, s := range st.subs {
				if s.to == c {
					errs = append(errs, fmt.Errorf("topology: %s: subscribed twice", where))
				}
			}
			st.subs = append(st.subs, sub)
			c.inputs = append(c.inputs, sub)
		}
	}
	if len(comps) > 0 && spouts == 0 {
		errs = append(errs, errors.New("topology: no spout"))
	}
	if len(comps) == 0 {
		errs = append(errs, errors.New("topology: empty topology"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return topoSort(comps)
}

// topoSort orders comps so that every component comes after those it
// subscribes to, or reports a cycle: executors are joined by bounded
// rings, and a cycle of full rings would deadlock.
func topoSort(comps []*component) ([]*component, error) {
	const (
		unseen = iota
		active
		done
	)
	state := map[*component]int{}
	var order []*component
	var path []*component
	var visit func(c *component) error
	visit = func(c *component) error {
		switch state[c] {
		case done:
			return nil
		case active:
			i := slices.Index(path, c)
			names := []string{}
			for _, p := range path[i:] {
				names = append(names, p.name)
			}
			names = append(names, c.name)
			return fmt.Errorf("topology: cycle %s (cycles are not allowed: executors are joined by bounded rings)", strings.Join(names, " -> "))
		}
		state[c] = active
		path = append(path, c)
		for _, in := range c.inputs {
			if err := visit(in.from.comp); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[c] = done
		order = append(order, c)
		return nil
	}
	for _, c := range comps {
		if err := visit(c); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// component is a resolved declaration.
type component struct {
	name     string
	spout    bool
	newSpout func() Spout
	newBolt  func() Bolt
	nexec    int
	ntasks   int
	decl     *Decl
	streams  []*stream
	inputs   []*subscription
	tasks    []int // global task ids, ascending
	execs    []*executor
	index    int // position in Topology.comps
	panics   panicLog
	// timeoutsHeld counts traced roots that timed out holding tuples at
	// one of the component's tasks; added to by spout executors.
	timeoutsHeld atomic.Uint64
}

func (c *component) stream(name string) *stream {
	for _, s := range c.streams {
		if s.name == name {
			return s
		}
	}
	return nil
}

// emitStream is the stream the component emits on by name, or the error
// of an emit on one it did not declare.
func (c *component) emitStream(name string) (*stream, error) {
	if st := c.stream(name); st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("topology: %s %q emits on undeclared stream %q (it declares: %s)", c.kind(), c.name, name, c.streamNames())
}

func (c *component) streamNames() string {
	if len(c.streams) == 0 {
		return "none"
	}
	var names []string
	for _, s := range c.streams {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

func (c *component) kind() string {
	if c.spout {
		return "spout"
	}
	return "bolt"
}

// stream is a declared output stream.
type stream struct {
	comp   *component
	name   string
	fields []string
	direct bool
	index  int
	subs   []*subscription
}

// subscription is one bolt's input from one stream.
type subscription struct {
	from     *stream
	to       *component
	g        Grouping
	fieldIdx []int
}
