package forward_test

import (
	"fmt"

	"felix/cluster/forward"
	"felix/cluster/transport"
	"felix/proto"
)

// The ingress side of a forwarded publish, as the broker wires it: route, decide, then
// one attempt per Send until the terminal action. request stands in for
// transport.Pool.Request: broker b moved the shard to c at generation 8, c is shedding
// once, then appends.
func ExampleMachine() {
	entry := forward.Entry{Assigned: true, Leader: forward.Node{ID: "b", Addr: "b:5000"}, Generation: 7}
	dec := forward.Ingress(forward.OpPublish, entry, "a")
	route := forward.Route{Tenant: "t1", Namespace: "ns", Name: "orders", Shard: 3, Shards: 8,
		Generation: dec.Generation}
	msg, err := forward.PublishMessage(route, [][]byte{[]byte("hello")}, []byte("<client token>"))
	if err != nil {
		panic(err)
	}
	answers := []func() (proto.InternalMessage, error){
		func() (proto.InternalMessage, error) {
			return &proto.InternalNotLeader{OwnerNodeID: []byte("c"), OwnerAddress: []byte("c:5000"), Generation: 8}, nil
		},
		func() (proto.InternalMessage, error) { return nil, transport.ErrShed },
		func() (proto.InternalMessage, error) {
			return &proto.ForwardPublishOk{FirstOffset: 41, LastOffset: 41}, nil
		},
	}
	request := func(_ string, _ proto.InternalMessage) (proto.InternalMessage, error) {
		next := answers[0]
		answers = answers[1:]
		return next()
	}
	m, act, err := forward.NewMachine(forward.Request{Kind: msg.Kind()}, dec.Node.ID, dec.Generation, forward.Options{})
	if err != nil {
		panic(err)
	}
	for act.Step == forward.Send {
		sent, err := forward.AsKind(msg, act.Kind, act.Generation)
		if err != nil {
			panic(err)
		}
		fmt.Printf("attempt %d: wait %v, send %v to %s at generation %d\n", act.Attempt, act.Backoff, act.Kind, act.To, act.Generation)
		act, _ = m.Step(forward.Classify(request(act.To, sent)))
	}
	fmt.Printf("%v offsets %d..%d\n", act.Step, act.FirstOffset, act.LastOffset)
	// Output:
	// attempt 1: wait 0s, send AuthorizedForwardPublish to b at generation 7
	// attempt 2: wait 0s, send AuthorizedForwardPublish to c at generation 8
	// attempt 3: wait 20ms, send AuthorizedForwardPublish to c at generation 8
	// ack offsets 41..41
}
