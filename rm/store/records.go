package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/knitdev/knit/rks/launch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// Record is one application as stored: the RM's own encoding in Data, and
// beside it the fields kubectl shows and pruning reads. A Record owns no
// memory the Store keeps; List returns fresh slices.
type Record struct {
	// ID is the application id, e.g. application_1700000000000_0001. The
	// object name derives from it (ObjectName).
	ID string
	// State is the YARN application state (RUNNING, FINISHED…).
	State string
	// User is the submitting user.
	User string
	// Queue is the leaf queue the application runs in.
	Queue string
	// FinishTime is when the application completed; zero while it runs.
	FinishTime time.Time
	// Data is the RM's encoding of the application, opaque here. It is kept
	// base64-encoded in the object, which must stay under the API server's
	// request limit (about 1.5 MB with etcd's defaults).
	Data []byte
	// ResourceVersion is the version of the object this Record was read from
	// or written as; empty for a record never stored. Put sends it for
	// optimistic concurrency.
	ResourceVersion string
}

// Keys of the YarnApplication spec. The layout is this package's; the API
// server keeps it as given (x-kubernetes-preserve-unknown-fields).
const (
	specID         = "id"
	specState      = "state"
	specUser       = "user"
	specQueue      = "queue"
	specFinishTime = "finishTime" // RFC 3339 with nanoseconds, UTC; absent while running
	specData       = "data"       // base64, standard encoding
)

// listPageSize is how many YarnApplications one List request asks for; a
// few thousand kept applications then cost a handful of requests, none of
// them large.
const listPageSize = 500

// maxConflictRounds bounds how often one write attempt re-reads an object
// that changed under it before it backs off like any transient failure.
const maxConflictRounds = 5

func (s *Store) apps() dynamic.ResourceInterface {
	return s.dyn.Resource(GVR()).Namespace(s.ns)
}

// Put creates or replaces the YarnApplication for rec.ID and returns rec
// with the ResourceVersion now stored. A stale or empty ResourceVersion is
// not an error: the RM is the only writer, so Put re-reads the object and
// overwrites it; it also recreates an object deleted meanwhile. Transient
// failures are retried until ctx ends (see the package doc).
func (s *Store) Put(ctx context.Context, rec Record) (Record, error) {
	obj, err := s.toObject(rec)
	if err != nil {
		return Record{}, err
	}
	var stored *unstructured.Unstructured
	err = s.retry(ctx, "put "+rec.ID, func(ctx context.Context) error {
		var err error
		stored, err = s.write(ctx, obj)
		return err
	})
	if err != nil {
		return Record{}, err
	}
	rec.ResourceVersion = stored.GetResourceVersion()
	return rec, nil
}

// write makes one attempt to store obj: update when it carries a
// resourceVersion, else create. When the object turns out to differ from
// what obj assumed (created by an earlier attempt whose answer was lost,
// changed, or deleted), write takes the current resourceVersion, keeping it
// in obj for later attempts, and tries again.
func (s *Store) write(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	apps := s.apps()
	for range maxConflictRounds {
		if obj.GetResourceVersion() == "" {
			out, err := apps.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
			if !apierrors.IsAlreadyExists(err) {
				return out, err
			}
		} else {
			out, err := apps.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return out, err
			}
		}
		cur, err := apps.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obj.SetResourceVersion("")
		case err != nil:
			return nil, err
		default:
			if err := s.checkWriter(cur); err != nil {
				return nil, err
			}
			s.log.Debug("overwriting changed application", "name", obj.GetName(),
				"had", obj.GetResourceVersion(), "current", cur.GetResourceVersion())
			obj.SetResourceVersion(cur.GetResourceVersion())
		}
	}
	return nil, errContended
}

// Delete removes the YarnApplication of application id. One that is already
// gone is not an error.
func (s *Store) Delete(ctx context.Context, id string) error {
	name, err := ObjectName(id)
	if err != nil {
		return err
	}
	return s.retry(ctx, "delete "+id, func(ctx context.Context) error {
		err := s.apps().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// List reads every stored application, listPageSize objects a request, all
// pages from one snapshot. If the snapshot expires between pages (etcd
// compacted it), List starts again. An object that does not decode is an
// error: recovery must not silently forget an application.
func (s *Store) List(ctx context.Context) ([]Record, error) {
	var out []Record
	cont := ""
	for {
		var page *unstructured.UnstructuredList
		err := s.retry(ctx, "list applications", func(ctx context.Context) error {
			var err error
			page, err = s.apps().List(ctx, metav1.ListOptions{Limit: listPageSize, Continue: cont})
			return err
		})
		if cont != "" && apierrors.IsResourceExpired(err) {
			s.log.Info("list snapshot expired, listing again", "readSoFar", len(out))
			out, cont = out[:0], ""
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			rec, err := fromObject(&page.Items[i])
			if err != nil {
				return nil, fmt.Errorf("store: list applications: %w", err)
			}
			out = append(out, rec)
		}
		if cont = page.GetContinue(); cont == "" {
			return out, nil
		}
	}
}

// toObject builds the YarnApplication for rec.
func (s *Store) toObject(rec Record) (*unstructured.Unstructured, error) {
	name, err := ObjectName(rec.ID)
	if err != nil {
		return nil, err
	}
	spec := map[string]any{
		specID:    rec.ID,
		specState: rec.State,
		specUser:  rec.User,
		specQueue: rec.Queue,
		specData:  base64.StdEncoding.EncodeToString(rec.Data),
	}
	if !rec.FinishTime.IsZero() {
		spec[specFinishTime] = rec.FinishTime.UTC().Format(time.RFC3339Nano)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version,
		"kind":       Kind,
		"spec":       spec,
	}}
	obj.SetName(name)
	obj.SetNamespace(s.ns)
	obj.SetLabels(map[string]string{
		// The pods' rule, so one selector finds an application and its pods.
		launch.LabelState:       launch.LabelValue(rec.State),
		launch.LabelApplication: launch.LabelValue(rec.ID),
		launch.LabelUser:        launch.LabelValue(rec.User),
		launch.LabelQueue:       launch.LabelValue(rec.Queue),
	})
	if e := s.epoch.Load(); e > 0 {
		obj.SetAnnotations(map[string]string{AnnotationEpoch: strconv.FormatInt(e, 10)})
	}
	obj.SetResourceVersion(rec.ResourceVersion)
	return obj, nil
}

// AnnotationEpoch is the RM epoch of a YarnApplication's last writer.
// Exported, as KeyEpoch, for tests that read the writes' order.
const AnnotationEpoch = "knit.io/rm-epoch"

// checkWriter refuses to overwrite an application last written by a newer
// RM epoch than this Store's: that RM leads now. The write that follows is
// conditioned on cur's resourceVersion, so the check holds for it.
func (s *Store) checkWriter(cur *unstructured.Unstructured) error {
	mine := s.epoch.Load()
	raw, ok := cur.GetAnnotations()[AnnotationEpoch]
	if mine == 0 || !ok {
		return nil
	}
	if theirs, err := strconv.ParseInt(raw, 10, 64); err == nil && theirs > mine {
		return fmt.Errorf("%w: %s last written by RM epoch %d, this RM's is %d", ErrFenced, cur.GetName(), theirs, mine)
	}
	return nil
}

// fromObject reads a Record back from its YarnApplication.
func fromObject(obj *unstructured.Unstructured) (Record, error) {
	field := func(key string) (string, error) {
		v, _, err := unstructured.NestedString(obj.Object, "spec", key)
		if err != nil {
			return "", fmt.Errorf("%s: spec.%s: %w", obj.GetName(), key, err)
		}
		return v, nil
	}
	rec := Record{ResourceVersion: obj.GetResourceVersion()}
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{specID, &rec.ID}, {specState, &rec.State}, {specUser, &rec.User}, {specQueue, &rec.Queue}} {
		if *f.dst, err = field(f.key); err != nil {
			return Record{}, err
		}
	}
	if rec.ID == "" {
		return Record{}, fmt.Errorf("%s: spec.%s missing", obj.GetName(), specID)
	}
	finish, err := field(specFinishTime)
	if err != nil {
		return Record{}, err
	}
	if finish != "" {
		if rec.FinishTime, err = time.Parse(time.RFC3339Nano, finish); err != nil {
			return Record{}, fmt.Errorf("%s: spec.%s: %w", obj.GetName(), specFinishTime, err)
		}
	}
	data, err := field(specData)
	if err != nil {
		return Record{}, err
	}
	if rec.Data, err = base64.StdEncoding.DecodeString(data); err != nil {
		return Record{}, fmt.Errorf("%s: spec.%s: %w", obj.GetName(), specData, err)
	}
	return rec, nil
}
