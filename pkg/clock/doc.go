// Package clock is the time source that etcdlock's packages take by
// injection: a Clock reads the time and starts Timers. Real is the clock of
// package time; package clocktest provides a fake one, moved by hand, for
// tests of timing logic.
//
// The interfaces hold only what etcdlock uses, so that any clock (the real
// one, a fake, an adaptor to another library's clock) is small to write.
package clock
