package placement

import (
	"strconv"

	"felix/cluster/replica"
	"felix/cluster/sim"
	"felix/proto"
)

// tick: re-fence the replicas that have not answered, ship to the others, move the mark,
// acknowledge the writes below it, and run the read rounds.
func (l *leading) tick(n *rnode, now sim.Time) []sim.Envelope[msg] {
	var out []sim.Envelope[msg]
	if len(l.fenced)+1 < len(n.w.replicas) && now.Sub(l.lastFence) >= simFenceEvery {
		out = l.fence(n, now)
	}
	if n.lead == nil || !l.serving {
		return out
	}
	l.tracker.LeaderDurable(uint64(len(n.log)))
	for _, id := range n.w.replicas {
		if sh := l.shippers[id]; sh != nil {
			out = append(out, l.ship(n, now, id, sh)...)
		}
	}
	for mark := min(l.tracker.Mark(), uint64(len(n.log))); l.released < mark; l.released++ {
		if v, ok := value(n.log[l.released]); ok {
			out = append(out, sim.Envelope[msg]{To: sim.External, Msg: msg{k: kAck, val: v, off: l.released}})
		}
	}
	return append(out, l.readTick(n, now)...)
}

// ship sends what each shipper asks for, from the leader's log.
func (l *leading) ship(n *rnode, now sim.Time, id sim.NodeID, sh *replica.Shipper) []sim.Envelope[msg] {
	var out []sim.Envelope[msg]
	for range 4 {
		snd := sh.Next(int64(now), 0, uint64(len(n.log)))
		if snd.Kind != replica.SendRecords {
			break
		}
		end, size := snd.From, uint64(0)
		for end < snd.To && end < snd.From+simMaxBatch && (end == snd.From || size+uint64(len(n.log[end])) <= snd.MaxBytes) {
			size += uint64(len(n.log[end]))
			end++
		}
		payloads := append([][]byte(nil), n.log[snd.From:end]...)
		corr := n.nextCorr()
		l.corrTo[corr] = id
		m := &proto.ReplicateRecords{Log: proto.LogStream, CorrelationID: corr, Epoch: l.gen,
			FirstOffset: snd.From, Checksum: proto.BatchChecksum(payloads), Payloads: payloads}
		sh.Sent(int64(now), corr, snd.From, end, size)
		out = append(out, sim.Envelope[msg]{To: id, Msg: msg{k: kRepl, pk: m.Kind(), m: m}})
	}
	return out
}

// value parses a client record "v<val>".
func value(rec []byte) (uint64, bool) {
	if len(rec) < 2 || rec[0] != 'v' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rec[1:]), 10, 64)
	return v, err == nil
}

// latest is the newest value in log[:end] and one past its offset (0, 0 when none).
func latest(log [][]byte, end uint64) (uint64, uint64) {
	for i := end; i > 0; i-- {
		if v, ok := value(log[i-1]); ok {
			return v, i
		}
	}
	return 0, 0
}

// get answers a client read: on the lease (lease mode: the committed value, at once while
// the lease is valid on this node's clock), or lease-free: the newest value taken now,
// answered once confirmed.
func (n *rnode) get(now sim.Time, id uint64) []sim.Envelope[msg] {
	l := n.lead
	refuse := func(err string) []sim.Envelope[msg] {
		return []sim.Envelope[msg]{{To: sim.External, Msg: msg{k: kGot, id: id, err: err}}}
	}
	switch {
	case l == nil || !l.serving:
		return refuse("NotLeader")
	case n.w.leaseReads:
		if err := n.lease.LeaderRead(n.local(now), l.gen); err != nil {
			return refuse(err.Error())
		}
		v, _ := latest(n.log, l.released)
		return []sim.Envelope[msg]{{To: sim.External, Msg: msg{k: kGot, id: id, val: v}}}
	}
	v, produced := latest(n.log, uint64(len(n.log)))
	l.reads.Take(ReadID(id), produced)
	l.readVal[ReadID(id)] = v
	return nil
}

// readTick starts a round for the reads waiting, fails rounds past their timeout, and
// answers the reads that are ready.
func (l *leading) readTick(n *rnode, now sim.Time) []sim.Envelope[msg] {
	var out []sim.Envelope[msg]
	for r, at := range l.roundAt {
		if now.Sub(at) >= simRoundTimeout {
			l.reads.RoundFailed(r)
			delete(l.roundAt, r)
		}
	}
	if round, ok := l.reads.StartRound(); ok {
		l.roundAt[round] = now
		for _, id := range n.w.replicas {
			if id == n.env.ID {
				continue
			}
			corr := n.nextCorr()
			l.roundCorr[corr] = round
			m := &proto.Fence{CorrelationID: corr, Log: proto.LogStream, Generation: l.gen}
			out = append(out, sim.Envelope[msg]{To: id, Msg: msg{k: kRepl, pk: m.Kind(), m: m}})
		}
	}
	l.reads.SetMark(l.tracker.Mark())
	for _, r := range l.reads.Ready() {
		m := msg{k: kGot, id: uint64(r.ID), val: l.readVal[r.ID]}
		if r.Err != nil {
			m = msg{k: kGot, id: uint64(r.ID), err: r.Err.Error()}
		}
		delete(l.readVal, r.ID)
		out = append(out, sim.Envelope[msg]{To: sim.External, Msg: m})
	}
	return out
}

func (l *leading) roundAnswer(round RoundID, from sim.NodeID, m msg) {
	switch a := m.m.(type) {
	case *proto.FenceOk:
		l.reads.RoundAnswer(round, name(from), a.Generation)
	case *proto.ReplicateError:
		if a.Code == proto.InternalFencedEpoch {
			l.reads.RoundFailed(round)
			delete(l.roundAt, round)
		}
	}
}

// report is the leader's replica report: itself at its log's end, each follower at what
// it acknowledged at this generation, every identity the one it was counted under.
func (l *leading) report(n *rnode) *Report {
	r := &Report{Leader: name(n.env.ID), Generation: l.gen, ServesByRound: !n.w.leaseReads}
	for _, id := range n.w.replicas {
		e := ReportEntry{NodeID: name(id), StorageID: "s" + name(id)}
		if id == n.env.ID {
			e.Durable = uint64(len(n.log))
		} else if sh := l.shippers[id]; sh != nil {
			e.Durable, _ = sh.Acked()
			if st, why := sh.State(); st == replica.Halted {
				e.Halted = why
			}
		}
		r.Entries = append(r.Entries, e)
	}
	return r
}
