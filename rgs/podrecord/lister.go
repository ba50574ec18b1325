package podrecord

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Lister reads records from a pod informer's store, as client-go's
// PodLister reads pods.
type Lister struct {
	store cache.Indexer
	strip *Stripper
}

// NewLister reads store, whose pods strip made records of (a pod put in
// the store some other way is read as strip's record of it).
func NewLister(store cache.Indexer, strip *Stripper) *Lister {
	return &Lister{store: store, strip: strip}
}

// List returns the records whose labels sel matches.
func (l *Lister) List(sel labels.Selector) ([]*Pod, error) {
	var out []*Pod
	for _, obj := range l.store.List() {
		p, ok := l.strip.Of(obj)
		if ok && sel.Matches(p.LabelSet()) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Get returns the record of pod namespace/name, or a NotFound error as a
// PodLister's.
func (l *Lister) Get(namespace, name string) (*Pod, error) {
	obj, exists, err := l.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("podrecord: get %s/%s: %w", namespace, name, err)
	}
	p, ok := l.strip.Of(obj)
	if !exists || !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("pod"), name)
	}
	return p, nil
}
