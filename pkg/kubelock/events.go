package kubelock

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// events posts the elector's events, as client-go's Lease lock does.
type events struct {
	recorder rl.EventRecorder
	subject  *metav1.PartialObjectMetadata
}

// SetEventRecorder posts the elector's events ("IDENTITY became leader",
// "IDENTITY stopped leading") to r from now on, as client-go's Lease lock
// does with its ResourceLockConfig.EventRecorder: type Normal, reason
// LeaderElection. With no Kubernetes object behind the record, the events
// name a LeaderRecord (apiVersion etcdlock.io/v1) called after the
// election, in namespace. Without it, events are only logged. r must not
// be nil (ErrInvalidOption).
func (l *Lock) SetEventRecorder(r rl.EventRecorder, namespace string) error {
	if r == nil {
		return invalid("nil event recorder")
	}
	e := &events{recorder: r, subject: &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: resource.Group + "/v1", Kind: "LeaderRecord"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace},
	}}
	l.mu.Lock()
	l.events = e
	l.mu.Unlock()
	return nil
}

// post posts identity's event about the election name.
func (e *events) post(name, identity, event string) {
	if e == nil {
		return
	}
	subject := e.subject.DeepCopy()
	subject.Name = name
	e.recorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%v %v", identity, event)
}
