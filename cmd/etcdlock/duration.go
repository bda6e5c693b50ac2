package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// seconds is a duration flag that also takes a plain number of seconds,
// as flock's -w 10 and timeout(1) do: 10, 1.5 or 10s, 2m, 1h30m.
type seconds time.Duration

var _ pflag.Value = (*seconds)(nil)

func (d *seconds) String() string { return time.Duration(*d).String() }

func (d *seconds) Type() string { return "duration" }

func (d *seconds) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f*float64(time.Second) > float64(1<<63-1) || f < 0 && f*float64(time.Second) < -float64(1<<63) {
			return fmt.Errorf("%s seconds is out of range", s)
		}
		*d = seconds(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want seconds (10, 1.5) or a duration (10s, 2m, 1h30m): %q", s)
	}
	*d = seconds(v)
	return nil
}

// secondsVar defines a flag like pflag's DurationVar that also takes a
// plain number of seconds.
func secondsVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var((*seconds)(p), name, usage)
}
