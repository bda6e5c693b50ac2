// Package holders observes and breaks the holders of lock names: Inspect
// and List read who holds and who waits, Follow reports each change of
// holders, Break asks a holder to release and fences it if it does not,
// Force takes a name from its holder at once. Each takes the key prefix
// the locks use (lock.DefaultPrefix unless they set lock.WithPrefix).
//
// Its errors are package lock's where a caller matches them:
// lock.ErrInvalidOption for a nil client or a prefix not ending in '/',
// lock.ErrInvalidName, lock.ErrNotHeld and lock.ErrNotOwner.
package holders
