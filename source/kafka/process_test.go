package kafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/xorack/xorack/internal/workerproc"
	"github.com/xorack/xorack/source/kafka/kafkatest"
	"github.com/xorack/xorack/topology"
)

// sizedCommit is a commit as the broker received it, with the ledger's
// size at that moment: every record processed before the commit was
// chosen is in the ledger's first size bytes.
type sizedCommit struct {
	partition int32
	offset    int64
	size      int64
	at        time.Time
}

type ledgerLine struct {
	p   int32
	off int64
	at  time.Time
	end int64 // byte offset after the line
	w   int   // the worker that wrote it (crashworker -id), -1 when untagged
}

func readLedger(t *testing.T, path string) []ledgerLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledgerLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	var pos int64
	for sc.Scan() {
		pos += int64(len(sc.Bytes())) + 1
		f := bytes.Fields(sc.Bytes())
		if len(f) != 3 && len(f) != 4 {
			t.Fatalf("ledger line %q", sc.Bytes())
		}
		p, _ := strconv.Atoi(string(f[0]))
		off, _ := strconv.ParseInt(string(f[1]), 10, 64)
		ns, _ := strconv.ParseInt(string(f[2]), 10, 64)
		w := -1
		if len(f) == 4 {
			w, _ = strconv.Atoi(string(f[3]))
		}
		out = append(out, ledgerLine{int32(p), off, time.Unix(0, ns), pos, w})
	}
	return out
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// stuckBackoff is the stuck record's retry backoff in the workers that
// TestReplayBoundAcrossProcesses kills. Every killed worker lives well
// under it (killed after a few thousand records, throttled to about 4,000
// a second), so each kill finds the record still waiting and its
// partition's floor pinned. The final worker, which no kill follows, runs
// unthrottled and retries the record after finalBackoff: what it must show
// (every record processed, and committed in order) needs neither a pinned
// floor nor a slow bolt, and it processed most of the records throttled
// with the record's 10 s out, 18 of the test's 27 s.
const (
	stuckBackoff = 10 * time.Second
	finalBackoff = 50 * time.Millisecond
)

// replayCompareEnv, set to anything, makes TestReplayBoundAcrossProcesses
// run a second arm with the done set off (Config.CommitMetadataBytes -1:
// the floor alone, the spout's behaviour before the done set) on the same
// kill schedule, and log both arms' measured replays per kill side by side
// (BENCHMARKS.md, "Replays per kill"). Off by default: it doubles the
// test's time.
const replayCompareEnv = "XORACK_REPLAY_COMPARE"

// killFigure is one kill's replays, measured from the ledger.
type killFigure struct {
	replayed  int64 // records processed after the kill that were done before it
	floorOnly int64 // records done at or above the committed floors (what the floor alone replays)
}

// Rule 18 across real processes: the worker (internal/crashworker, a
// separate OS process) is SIGKILLed at random points and restarted against
// the in-process cluster, with one record stuck in a 10 s retry backoff
// pinning its partition's floor at every kill (the test checks that the
// record was not yet processed at any kill). (a) Nothing is lost; (b) no
// commit the broker received was ahead of a record not yet processed; (c)
// the records processed again after each kill are at most the spout's
// pending bound (in flight) plus the records completed since the last
// commit the broker had. With XORACK_REPLAY_COMPARE set, a second arm runs
// the same schedule with the done set off and its replays are measured,
// not modelled.
func TestReplayBoundAcrossProcesses(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	bin := workerproc.Build(t, "./internal/crashworker")
	var on, off []killFigure
	t.Run("done-set", func(t *testing.T) { on = replayAcrossKills(t, bin, seed, 0) })
	if os.Getenv(replayCompareEnv) == "" {
		return
	}
	t.Run("floor-only", func(t *testing.T) { off = replayAcrossKills(t, bin, seed, -1) })
	for k := range min(len(on), len(off)) {
		t.Logf("kill %d: replayed %d with the done set, %d with the floor alone (both measured; the floor arm had %d done at or above its floors)",
			k+1, on[k].replayed, off[k].replayed, off[k].floorOnly)
	}
}

// replayAcrossKills runs one arm of TestReplayBoundAcrossProcesses with
// the workers' Config.CommitMetadataBytes at metaBytes (0: the default
// done set budget; -1: the floor alone) and returns each kill's figures.
// The kill schedule comes from seed, so two arms share it.
func replayAcrossKills(t *testing.T, bin string, seed uint64, metaBytes int) []killFigure {
	const topic, group, parts, stuckPart, stuckOff = "t", "g", 4, 0, 10
	const interval = 100 * time.Millisecond
	n := size(20_000, 5_000) // per partition
	kills := size(4, 2)
	c := startClusterWith(t, kafkatest.Config{Topics: []string{topic}, Partitions: parts, MinSessionTimeout: 100 * time.Millisecond})
	c.produce(t, topic, parts, n)
	ledger := filepath.Join(t.TempDir(), "ledger")

	rec := recordCommits(c, ledger)
	mu, commits := &rec.mu, &rec.commits
	start := func(backoff time.Duration, throttle string) *exec.Cmd {
		// -throttle after startWorker's own: the last one counts.
		return startWorker(t, bin, c, topic, group, ledger, interval, "-backoff", backoff.String(), "-throttle", throttle,
			"-metadata-bytes", strconv.Itoa(metaBytes),
			"-stuck-partition", strconv.Itoa(stuckPart), "-stuck-offset", strconv.Itoa(stuckOff))
	}
	rng := rand.New(rand.NewPCG(seed, 5))
	const lineBytes = 24 // "p offset unixnano\n", about
	var killAt []time.Time
	var lived []time.Duration
	for k := range kills {
		from := fileSize(ledger)
		began := time.Now()
		cmd := start(stuckBackoff, "2")
		// A random moment: after a random share of the records left.
		grow := int64(n*parts/(kills+2)/4+rng.IntN(n*parts/(kills+2)/2)) * lineBytes
		mu.Lock()
		c0 := len(*commits)
		mu.Unlock()
		want := 1 + rng.IntN(3) // and after a few of this process's commits
		waitFor(t, "the worker processing records and committing", func() bool {
			mu.Lock()
			nc := len(*commits) - c0
			mu.Unlock()
			return fileSize(ledger) >= from+grow && nc >= want
		})
		killAt = append(killAt, time.Now())
		lived = append(lived, time.Since(began))
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
		t.Logf("kill %d after %d bytes of ledger, %v after the worker started", k+1, fileSize(ledger)-from, lived[k].Round(time.Millisecond))
	}
	final := start(finalBackoff, "0")
	waitCommittedTo(t, c, group, topic, parts, n)
	workerproc.Stop(t, final)

	lines := readLedger(t, ledger)
	checkLedger(t, lines, rec.all(), parts, n)
	// Every kill found the stuck record in its backoff: not yet processed
	// (it is in the ledger only once its retry succeeds) and its
	// partition's committed floor at or below it.
	for _, l := range lines {
		if l.p == stuckPart && l.off == stuckOff && l.at.Before(killAt[len(killAt)-1]) {
			t.Fatalf("the stuck record %d/%d was processed at %v, before the last kill at %v: a kill came after its %v backoff, and the floor was not pinned",
				stuckPart, stuckOff, l.at.Format(time.StampMilli), killAt[len(killAt)-1].Format(time.StampMilli), stuckBackoff)
		}
	}
	// (c) replays per kill.
	done := map[[2]int64]bool{}
	li := 0
	pending := int64(topology.DefaultMaxSpoutPending)
	var figs []killFigure
	for k, at := range killAt {
		// The last commit the broker had before the kill.
		var last time.Time
		floor := make([]int64, parts)
		for _, cm := range rec.all() {
			if cm.at.Before(at) {
				last = cm.at
				floor[cm.partition] = max(floor[cm.partition], cm.offset)
			}
		}
		if floor[stuckPart] > stuckOff {
			t.Fatalf("kill %d: partition %d committed to %d, past the stuck record %d", k+1, stuckPart, floor[stuckPart], stuckOff)
		}
		var since, aboveFloor int64
		for ; li < len(lines) && lines[li].at.Before(at); li++ {
			l := lines[li]
			done[[2]int64{int64(l.p), l.off}] = true
			if !l.at.Before(last) {
				since++
			}
		}
		for key := range done {
			if key[1] >= floor[key[0]] {
				aboveFloor++
			}
		}
		// Replayed: records processed after the kill that were done before it.
		var replayed int64
		again := map[[2]int64]bool{}
		for j := li; j < len(lines) && (k+1 == len(killAt) || lines[j].at.Before(killAt[k+1])); j++ {
			key := [2]int64{int64(lines[j].p), lines[j].off}
			if done[key] && !again[key] {
				again[key] = true
				replayed++
			}
		}
		figs = append(figs, killFigure{replayed, aboveFloor})
		bound, of := pending+since, fmt.Sprintf("in flight %d + %d completed since the last commit", pending, since)
		if metaBytes < 0 {
			// The floor alone: everything done at or above the floors
			// replays, plus what was in flight.
			bound, of = pending+aboveFloor, fmt.Sprintf("in flight %d + %d done at or above the floors", pending, aboveFloor)
		}
		t.Logf("kill %d: replayed %d; bound %d (%s); %d completed since the last commit, %d done at or above the floors", k+1, replayed, bound, of, since, aboveFloor)
		if replayed > bound {
			t.Errorf("kill %d: %d records replayed, over the bound %d", k+1, replayed, bound)
		}
	}
	return figs
}

// commitRecorder records every offset commit the cluster receives, with
// the ledger's size at that moment.
type commitRecorder struct {
	mu      sync.Mutex
	commits []sizedCommit
}

func recordCommits(c *cluster, ledger string) *commitRecorder {
	rec := &commitRecorder{}
	c.k.Cluster().ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.k.Cluster().KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		sz, now := fileSize(ledger), time.Now()
		rec.mu.Lock()
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				rec.commits = append(rec.commits, sizedCommit{rp.Partition, rp.Offset, sz, now})
			}
		}
		rec.mu.Unlock()
		return nil, nil, false
	})
	return rec
}

func (r *commitRecorder) all() []sizedCommit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.commits)
}

// startWorker starts a worker process on topic (one topic, one partition
// count) writing to ledger.
func startWorker(t *testing.T, bin string, c *cluster, topic, group, ledger string, interval time.Duration, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-brokers", c.k.Addrs()[0], "-topic", topic, "-group", group,
		"-ledger", ledger, "-interval", interval.String(), "-throttle", "2"}, args...)...)
	cmd.Stderr = os.Stderr
	workerproc.Start(t, cmd)
	return cmd
}

func waitCommittedTo(t *testing.T, c *cluster, group, topic string, parts int32, n int) {
	t.Helper()
	waitFor(t, "every partition committed to its end", func() bool {
		for p := range parts {
			if c.committed(group, topic, p) != int64(n) {
				return false
			}
		}
		return true
	})
}

// checkLedger checks (a) every record of parts x n is in the ledger and
// (b) no commit was ahead of a record not yet processed: at each commit,
// every record below its offset was in the ledger (a watermark per
// partition over the ledger in order).
func checkLedger(t *testing.T, lines []ledgerLine, commits []sizedCommit, parts int32, n int) {
	t.Helper()
	seen := make([][]bool, parts)
	for p := range seen {
		seen[p] = make([]bool, n)
	}
	for _, l := range lines {
		seen[l.p][l.off] = true
	}
	for p := range parts {
		if i := slices.Index(seen[p], false); i >= 0 {
			t.Fatalf("record %d/%d never processed", p, i)
		}
	}
	slices.SortStableFunc(commits, func(a, b sizedCommit) int { return int(a.size - b.size) })
	have := make([][]bool, parts)
	mark := make([]int64, parts)
	for p := range have {
		have[p] = make([]bool, n)
	}
	li := 0
	for _, cm := range commits {
		for li < len(lines) && lines[li].end <= cm.size {
			l := lines[li]
			have[l.p][l.off] = true
			for mark[l.p] < int64(n) && have[l.p][mark[l.p]] {
				mark[l.p]++
			}
			li++
		}
		if cm.offset > mark[cm.partition] {
			t.Fatalf("commit of %d/%d when record %d/%d was not processed", cm.partition, cm.offset, cm.partition, mark[cm.partition])
		}
	}
	if len(commits) == 0 {
		t.Fatal("no commits")
	}
}

// Several processes, one group: three worker processes share the
// partitions; one is SIGKILLed mid-run and the other two take its
// partitions after its session times out. Nothing is lost and no commit
// is ahead of a record not processed.
func TestSeveralProcessesOneGroup(t *testing.T) {
	const topic, group, parts = "t", "g", 6
	n := size(6_000, 2_000) // per partition
	bin := workerproc.Build(t, "./internal/crashworker")
	c := startClusterWith(t, kafkatest.Config{Topics: []string{topic}, Partitions: parts, MinSessionTimeout: 100 * time.Millisecond})
	c.produce(t, topic, parts, n)
	ledger := filepath.Join(t.TempDir(), "ledger")
	rec := recordCommits(c, ledger)
	var ws []*exec.Cmd
	for range 3 {
		ws = append(ws, startWorker(t, bin, c, topic, group, ledger, 100*time.Millisecond))
	}
	// Killed once every worker has its share and a third is processed.
	waitFor(t, "a third processed", func() bool { return fileSize(ledger) >= int64(n*parts/3*24) })
	_ = ws[0].Process.Kill()
	_ = ws[0].Wait()
	waitCommittedTo(t, c, group, topic, parts, n)
	workerproc.Stop(t, ws[1])
	workerproc.Stop(t, ws[2])
	lines := readLedger(t, ledger)
	checkLedger(t, lines, rec.all(), parts, n)
	t.Logf("%d records, %d processed (%d again after the kill)", n*parts, len(lines), len(lines)-n*parts)
}

// Commits continue through rebalances (rule 9): three worker processes in
// one group; a fourth joins mid-run, and the broker holds one member's
// JoinGroup (the slow member, as one that notices the rebalance late at
// its next heartbeat) so that the others, which rejoined at once, wait in
// the join. While they wait, one of them is SIGKILLed. The victim
// committed the partitions it kept through the rebalance on schedule, so
// the records it had done and that are processed again after the kill
// are at most its in flight (the pending bound), plus what it completed
// in the last two commit intervals (one interval, and one more for the
// commit's round trip and the scheduling of a loaded machine), plus the
// done records the revocations could not commit (Stats.RevokeUncommitted,
// which each worker's log names). Before the spout committed through
// rebalances, the victim's last commit was as old as its wait in the
// join, and it replayed all it did since. Nothing is lost and no commit
// is ahead of a record not processed.
func TestCommitsContinueThroughRebalances(t *testing.T) {
	const topic, group, parts, victim, slow = "t", "g", 6, 1, 2
	const interval = 100 * time.Millisecond
	n := size(12_000, 6_000) // per partition
	bin := workerproc.Build(t, "./internal/crashworker")
	c := startClusterWith(t, kafkatest.Config{Topics: []string{topic}, Partitions: parts, MinSessionTimeout: 100 * time.Millisecond})
	c.produce(t, topic, parts, n)
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	rec := recordCommits(c, ledger)
	logOf := func(id int) string { return filepath.Join(dir, fmt.Sprintf("worker-%d.log", id)) }
	start := func(id int) *exec.Cmd {
		// The rebalance timeout outlasts the held join.
		return startWorker(t, bin, c, topic, group, ledger, interval, "-id", strconv.Itoa(id), "-log", logOf(id), "-rebalance", "20s")
	}
	ws := map[int]*exec.Cmd{}
	for id := 1; id <= 3; id++ {
		ws[id] = start(id)
	}
	kc := c.k.Cluster()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := kc.WaitGroupStable(ctx, group, 3); err != nil {
		t.Fatalf("three members: %v", err)
	}
	waitFor(t, "a sixth processed", func() bool { return fileSize(ledger) >= int64(n*parts/6*26) })
	// Who is who: the members' ids by worker.
	memberOf := map[int]string{}
	for _, m := range kc.GroupInfo(group).Members {
		if id, err := strconv.Atoi(strings.TrimPrefix(m.ClientID, "crashworker-")); err == nil {
			memberOf[id] = m.MemberID
		}
	}
	if len(memberOf) != 3 {
		t.Fatalf("members by worker: %v", memberOf)
	}
	// The JoinGroup requests of the rebalance, by member id; the slow
	// member's first one is held until the gate opens.
	var jmu sync.Mutex
	joined := map[string]time.Time{}
	var watch, held atomic.Bool
	gate := make(chan struct{})
	var openGate sync.Once
	release := func() { openGate.Do(func() { close(gate) }) }
	t.Cleanup(release)
	kc.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.JoinGroupRequest)
		if !watch.Load() || r.Group != group {
			return nil, nil, false
		}
		jmu.Lock()
		if _, ok := joined[r.MemberID]; !ok {
			joined[r.MemberID] = time.Now()
		}
		jmu.Unlock()
		if r.MemberID == memberOf[slow] && held.CompareAndSwap(false, true) {
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	watch.Store(true)
	ws[4] = start(4)
	// The victim noticed the rebalance at its next heartbeat (100 ms)
	// and waits in the join for the slow member. Killed a random 800 to
	// 1,500 ms into that wait.
	var waitFrom time.Time
	waitFor(t, "the victim in the join", func() bool {
		jmu.Lock()
		defer jmu.Unlock()
		waitFrom = joined[memberOf[victim]]
		return !waitFrom.IsZero()
	})
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kill := waitFrom.Add(800*time.Millisecond + time.Duration(rng.IntN(700))*time.Millisecond)
	waitFor(t, "the moment of the kill", func() bool { return !time.Now().Before(kill) })
	state := "gone"
	if g := kc.GroupInfo(group); g != nil {
		state = g.State
	}
	killAt := time.Now()
	_ = ws[victim].Process.Kill() // SIGKILL
	_ = ws[victim].Wait()
	delete(ws, victim)
	release()
	if !held.Load() {
		t.Fatal("the slow member's join was never held")
	}
	t.Logf("worker %d killed %v after it joined the rebalance (group %s, the slow member's join held)", victim, killAt.Sub(waitFrom).Round(time.Millisecond), state)
	waitCommittedTo(t, c, group, topic, parts, n)
	// Everything is processed and committed: the survivors are killed
	// too (a clean stop would wait in the group's next rebalance for the
	// slow member; TestSeveralProcessesOneGroup checks clean stops).
	for _, w := range ws {
		_ = w.Process.Kill()
		_ = w.Wait()
	}

	lines := readLedger(t, ledger)
	checkLedger(t, lines, rec.all(), parts, n)
	// The victim's replays: records it had processed before the kill
	// that were processed again after it.
	mine := map[[2]int64]bool{}
	var recent int64
	victimParts := map[int32]bool{}
	for _, l := range lines {
		if l.w != victim || !l.at.Before(killAt) {
			continue
		}
		mine[[2]int64{int64(l.p), l.off}] = true
		if killAt.Sub(l.at) <= 2*interval {
			recent++
			victimParts[l.p] = true
		}
	}
	var replayed int64
	again := map[[2]int64]bool{}
	for _, l := range lines {
		key := [2]int64{int64(l.p), l.off}
		if !l.at.Before(killAt) && mine[key] && !again[key] {
			again[key] = true
			replayed++
		}
	}
	// The revocations' uncommitted done records, from every worker's log
	// (those of partitions the victim took over replay after the kill
	// too, and its own revocations').
	var uncommitted int64
	for id := 1; id <= 4; id++ {
		uncommitted += revokeUncommitted(t, logOf(id))
	}
	// How old the last commit of each partition the victim was working
	// on was at the kill: the figure the rebalance used to inflate.
	var oldest time.Duration
	for p := range victimParts {
		var last time.Time
		for _, cm := range rec.all() {
			if cm.partition == p && cm.at.Before(killAt) && cm.at.After(last) {
				last = cm.at
			}
		}
		oldest = max(oldest, killAt.Sub(last))
	}
	pending := int64(topology.DefaultMaxSpoutPending)
	bound := pending + recent + uncommitted
	t.Logf("worker %d: %d records processed before the kill, %d replayed; bound %d (in flight %d + %d completed in the last %v + %d the revocations did not commit); its partitions' last commits at most %v old at the kill",
		victim, len(mine), replayed, bound, pending, recent, 2*interval, uncommitted, oldest.Round(time.Millisecond))
	if len(mine) == 0 {
		t.Fatalf("worker %d processed nothing before the kill", victim)
	}
	if replayed > bound {
		t.Errorf("worker %d: %d records replayed after the kill, over the bound %d", victim, replayed, bound)
	}
}

// revokeUncommitted sums the done records that revocations could not
// commit, from a worker's JSON log (the spout's warning says how many).
func revokeUncommitted(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for line := range bytes.Lines(b) {
		var e struct {
			Msg         string `json:"msg"`
			Uncommitted int64  `json:"uncommitted_done"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue // a line cut by the SIGKILL
		}
		if strings.HasPrefix(e.Msg, "kafka: partitions revoked with done records") {
			sum += e.Uncommitted
		}
	}
	return sum
}
