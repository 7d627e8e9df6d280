package fencing_test

import (
	"context"
	"fmt"

	"github.com/kira-scheduler/kira/fencing"
)

// A protected resource keeps the highest token it accepted and rejects lower ones.
func ExampleParseToken() {
	highest := fencing.Token(0)
	for _, header := range []string{"41", "57", "41"} { // the last is a paused ex-leader
		tok, err := fencing.ParseToken(header)
		if err != nil || tok < highest {
			fmt.Println("reject", header)
			continue
		}
		highest = tok
		fmt.Println("accept", header)
	}
	ctx := fencing.WithToken(context.Background(), highest)
	t, _ := fencing.FromContext(ctx)
	fmt.Println("context carries", t)
	// Output:
	// accept 41
	// accept 57
	// reject 41
	// context carries 57
}
