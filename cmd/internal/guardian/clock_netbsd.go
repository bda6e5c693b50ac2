package guardian

// clockMonotonic is CLOCK_MONOTONIC of NetBSD's <time.h>, which
// golang.org/x/sys/unix does not define there.
const clockMonotonic = 3
