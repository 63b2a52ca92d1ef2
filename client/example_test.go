package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"felix/client"
)

// The examples need a running broker (go run ./cmd/felix-broker); they compile as
// documentation and are not run by go test.

func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "127.0.0.1:5000",
		client.WithTokenFile("felix-data/admin.token"),
		client.WithFingerprint("<the broker's fingerprint_sha256>"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Printf("flags %#x features %v\n", c.Capabilities().Flags, c.Capabilities().Features)
}

func ExamplePublisher() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:5000", client.WithInsecureSkipVerify())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewPublisher("orders", client.PublisherOptions{
		Linger:     2 * time.Millisecond,
		Offsets:    true, // acks carry offsets
		Idempotent: true, // lost answers are re-sent without duplicates
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	var pending []client.Pending
	for i := range 10 {
		pd, err := p.Publish(ctx, fmt.Appendf(nil, "order-%d", i))
		if err != nil {
			log.Fatal(err)
		}
		pending = append(pending, pd)
	}
	for _, pd := range pending {
		res, err := pd.Wait(ctx)
		switch {
		case errors.Is(err, client.ErrIndeterminate):
			log.Println("outcome unknown; retries exhausted")
		case errors.Is(err, client.ErrRefused):
			log.Println("refused:", err)
		case err == nil:
			fmt.Println("stored at offset", res.FirstOffset)
		}
	}
}

func ExampleClient_Subscribe() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:5000", client.WithInsecureSkipVerify())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "orders", client.Earliest, client.SubscribeOptions{})
	var ce *client.CursorError
	if errors.As(err, &ce) {
		log.Fatalf("start offset unavailable: %v (oldest %d)", ce.Reason, ce.Available)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	for {
		r, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if r.Gap > 0 {
			log.Printf("%d records dropped before offset %d", r.Gap, r.Offset)
		}
		fmt.Printf("shard %d offset %d: %s\n", r.Shard, r.Offset, r.Payload)
	}
}

func ExampleClient_Get() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:5000", client.WithInsecureSkipVerify())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, "sessions", "user-1", []byte("token"), time.Minute); errors.Is(err, client.ErrIndeterminate) {
		log.Println("put may or may not have landed; not re-sent")
	}
	value, found, err := c.Get(ctx, "sessions", "user-1")
	if err != nil {
		log.Fatal(err)
	}
	if !found {
		fmt.Println("miss")
	} else {
		fmt.Printf("hit: %q\n", value)
	}
	if removed, found, err := c.Delete(ctx, "sessions", "user-1"); err == nil && found {
		fmt.Printf("removed %q\n", removed)
	}
	sum, err := c.CounterAdd(ctx, "sessions", "logins", 1)
	if err == nil {
		fmt.Println("logins:", sum)
	}
}

func ExampleClient_Watch() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:5000", client.WithInsecureSkipVerify())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	w, err := c.Watch(ctx, "config", "feature/", client.WatchOptions{Prefix: true})
	if errors.Is(err, client.ErrUnsupported) {
		log.Fatal("this broker has no cache watches")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close(ctx)
	for {
		ch, err := w.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ch.Op, ch.Key, string(ch.Value))
	}
}

func ExampleClient_Poll() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:5000", client.WithInsecureSkipVerify())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for {
		recs, err := c.Poll(ctx, "orders", 0, "billing", 100, time.Second)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			if r.Delivery > 3 {
				_ = c.Nack(ctx, "orders", 0, "billing", 5*time.Second, r.Offset)
				continue
			}
			fmt.Printf("offset %d: %s\n", r.Offset, r.Payload)
			if err := c.Ack(ctx, "orders", 0, "billing", r.Offset); err != nil {
				log.Println(err)
			}
		}
		dead, _, _, err := c.DeadLetters(ctx, "orders", 0, "billing", 0, 100)
		if err == nil && len(dead) > 0 {
			offsets := make([]uint64, len(dead))
			for i, d := range dead {
				offsets[i] = d.Offset
			}
			n, _ := c.Redrive(ctx, "orders", 0, "billing", offsets...)
			fmt.Println("redriven:", n)
		}
	}
}

func ExampleAdmin() {
	ctx := context.Background()
	a, err := client.NewAdmin("127.0.0.1:8080", client.AdminToken("<admin token>"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := a.CreateStream(ctx, client.StreamInfo{Name: "orders", Shards: 4, Durable: true}); errors.Is(err, client.ErrExists) {
		fmt.Println("already there")
	}
	if _, err := a.CreateCache(ctx, client.CacheInfo{Name: "sessions"}); err != nil && !errors.Is(err, client.ErrExists) {
		log.Fatal(err)
	}
	streams, _ := a.ListStreams(ctx)
	for _, s := range streams {
		fmt.Println(s.Name, s.Shards)
	}
}
