package kubelock

import (
	"errors"
	"fmt"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Errors returned by New and by the lock's methods, and the causes of a
// term's end (context.Cause of Term.Context).
var (
	// ErrInvalidOption is returned by New for a bad argument or option.
	ErrInvalidOption = errors.New("kubelock: invalid option")
	// ErrClosed is returned by every method after Close, and ends the term
	// that Close cut short.
	ErrClosed = errors.New("kubelock: lock closed")
	// ErrStillLeading is returned by Create while the elector still leads
	// after this lock's term ended: the elector must stop leading
	// (OnStoppedLeading) before a new term can start.
	ErrStillLeading = errors.New("kubelock: the term ended while the elector still leads")
	// ErrDeadline ends a term whose lease was not renewed by the
	// conservative deadline.
	ErrDeadline = errors.New("kubelock: no renewal before the deadline")
	// ErrRecordGone ends a term whose record was deleted in etcd, taken by
	// another holder, or whose lease etcd no longer has.
	ErrRecordGone = errors.New("kubelock: the record was deleted or taken in etcd")
	// ErrReleased ends a term that the elector released (ReleaseOnCancel).
	ErrReleased = errors.New("kubelock: term released")
	// ErrStoppedLeading ends a term when the elector stops leading
	// (RecordEvent("stopped leading")) without having released it.
	ErrStoppedLeading = errors.New("kubelock: the elector stopped leading")
	// ErrConcurrentElectors ends a term when a second elector starts
	// leading on the lock while another leads (see Lock.RecordEvent).
	ErrConcurrentElectors = errors.New("kubelock: two electors led on one lock at once")
	// ErrHolderAlive is wrapped by Create's error while the record is gone
	// but the etcd lease of its last holder is alive.
	ErrHolderAlive = errors.New("kubelock: the last holder's etcd lease is still alive")
	// ErrNotRead is returned by Update, with this lock's identity as
	// holder or an empty one (a release), before the lock has read the
	// record (Get) or written it (Create), or when its last Get found no
	// record, as the Lease lock returns "lease
	// not initialized": there is no version of the record to update.
	ErrNotRead = errors.New("kubelock: the record has not been read: call Get or Create first")
	// ErrNoTerm is returned by Lock.Term when no term has started, and is
	// the cause of the context Lead gives a callback that client-go ran
	// without a Create of this lock.
	ErrNoTerm = errors.New("kubelock: no term has started")
	// ErrConflict is returned by ElectionConfig, and by package
	// ctrlmanager's Options, when the caller's configuration sets a field
	// to a value the lock cannot honour: it is refused, never overridden.
	ErrConflict = errors.New("kubelock: option conflicts with the lock")
)

// resource names the record in the Kubernetes API errors that client-go's
// elector inspects (apierrors.IsNotFound, IsConflict).
var resource = schema.GroupResource{Group: "etcdlock.io", Resource: "leaderrecords"}

func notFound(name string) error { return apierrors.NewNotFound(resource, clip(name)) }

func conflict(name string, err error) error { return apierrors.NewConflict(resource, clip(name), err) }

func alreadyExists(name string) error { return apierrors.NewAlreadyExists(resource, clip(name)) }

// clipBytes is how much of a name, identity or key an error message
// shows.
const clipBytes = 128

// clip is s as error messages show it: whole up to clipBytes, else its
// first clipBytes bytes (cut at a character's start) and its length. A
// name may be up to MaxNameBytes long.
func clip(s string) string {
	if len(s) <= clipBytes {
		return s
	}
	cut := clipBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:cut], len(s))
}
