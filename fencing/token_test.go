package fencing

import (
	"errors"
	"testing"
)

func TestParseToken(t *testing.T) {
	tests := []struct {
		in      string
		want    Token
		wantErr bool
	}{
		{in: "1", want: 1},
		{in: "42", want: 42},
		{in: "007", wantErr: true}, // one spelling per token: String's
		{in: "01", wantErr: true},
		{in: "00", wantErr: true},
		{in: "10", want: 10},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", wantErr: true},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1 ", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "abc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseToken(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("ParseToken(%q) = %v, %v; want ErrInvalidToken", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseToken(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "42", "-1", "0", "", "9223372036854775808", "0x1", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			return
		}
		if !tok.IsValid() {
			t.Fatalf("ParseToken(%q) accepted invalid token %d", s, tok)
		}
		back, err := ParseToken(tok.String())
		if err != nil || back != tok {
			t.Fatalf("round trip of %d: %v, %v", tok, back, err)
		}
		if tok.String() != s {
			t.Fatalf("ParseToken(%q) accepted another spelling of %s", s, tok)
		}
	})
}

func TestTokenTextRoundTrip(t *testing.T) {
	var got Token
	if err := got.UnmarshalText([]byte("123")); err != nil || got != 123 {
		t.Fatalf("UnmarshalText: %v, %v", got, err)
	}
	if err := got.UnmarshalText([]byte("-5")); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("UnmarshalText(-5) err = %v", err)
	}
	if got != 123 {
		t.Fatalf("failed UnmarshalText modified token: %v", got)
	}
	b, _ := Token(99).MarshalText()
	if string(b) != "99" {
		t.Fatalf("MarshalText = %q", b)
	}
}
