package fencing

import (
	"context"
	"errors"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []Token{1, 42, 1 << 40} {
		got, err := ParseToken(tok.String())
		if err != nil || got != tok {
			t.Fatalf("ParseToken(%q) = %v, %v; want %v", tok.String(), got, err, tok)
		}
	}
}

func TestParseTokenRejectsNonRevisions(t *testing.T) {
	for _, s := range []string{"", "0", "-3", "12a", "1.5"} {
		if _, err := ParseToken(s); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ParseToken(%q) error = %v; want ErrInvalidToken", s, err)
		}
	}
}

func TestContextCarriesToken(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("empty context reported a token")
	}
	ctx := WithToken(context.Background(), 77)
	if got, ok := FromContext(ctx); !ok || got != 77 {
		t.Fatalf("FromContext = %v, %v; want 77, true", got, ok)
	}
}
