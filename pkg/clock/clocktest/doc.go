// Package clocktest provides Fake, a clock.Clock whose time moves only when
// a test moves it, for testing timing logic without waiting on real time.
package clocktest
