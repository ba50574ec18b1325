package auxservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

// HostConfig holds what a Host needs.
type HostConfig struct {
	// Client publishes the services on the node's Node object.
	Client kubernetes.Interface
	// NodeName is the Kubernetes node knit-node runs on.
	NodeName string
	// Services are the node's aux services; their names must differ.
	Services []Service
	Logger   *slog.Logger
}

// Host runs a node's aux services, tells them of applications, and
// publishes which of them run (and their metadata) where RKS reads it.
type Host struct {
	cfg      HostConfig
	log      *slog.Logger
	services map[string]Service
}

// NewHost returns a host; Run starts its services.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Client == nil || cfg.NodeName == "" {
		return nil, errors.New("auxservice: Client and NodeName are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	services := make(map[string]Service, len(cfg.Services))
	for _, s := range cfg.Services {
		if _, dup := services[s.Name()]; dup {
			return nil, fmt.Errorf("auxservice: two services named %q", s.Name())
		}
		services[s.Name()] = s
	}
	return &Host{cfg: cfg, log: cfg.Logger, services: services}, nil
}

// Metadata is every service's metadata by name: the environment's
// NM_AUX_SERVICE_<name> and startContainers' services_meta_data.
func (h *Host) Metadata() map[string][]byte {
	out := make(map[string][]byte, len(h.services))
	for name, s := range h.services {
		out[name] = s.Metadata()
	}
	return out
}

// Run serves every service until ctx ends or one of them fails, publishing
// them on the Node while they run. A service that fails takes the host down
// with it: a node that advertises a service that does not answer is worse
// than a node that is seen to be broken.
func (h *Host) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for name, s := range h.services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Serve(ctx)
			if err == nil && ctx.Err() == nil {
				err = errors.New("stopped serving")
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("auxservice: %s: %w", name, err)
				}
				mu.Unlock()
				cancel()
			}
		}()
	}
	err := h.publish(ctx, h.Metadata())
	if err != nil {
		cancel()
	} else {
		h.log.InfoContext(ctx, "aux services published", "node", h.cfg.NodeName, "services", len(h.services))
	}
	<-ctx.Done()
	wg.Wait()
	// Taken off the Node so that no AM is told of a service that no longer
	// listens. The run's context is over; the unpublish gets its own bound.
	stop, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelStop()
	if uerr := h.publish(stop, nil); uerr != nil {
		h.log.WarnContext(stop, "aux services not unpublished", "node", h.cfg.NodeName, "err", uerr)
	}
	if err != nil {
		return err
	}
	return firstErr
}

// publish sets (services non-nil) or removes the Node's aux-service
// annotation.
func (h *Host) publish(ctx context.Context, services map[string][]byte) error {
	var value *string
	if services != nil {
		v, err := launch.EncodeAuxServices(services)
		if err != nil {
			return err
		}
		value = &v
	}
	if err := PatchNodeAnnotation(ctx, h.cfg.Client, h.cfg.NodeName, launch.AnnotationAuxServices, value); err != nil {
		return fmt.Errorf("auxservice: publish: %w", err)
	}
	return nil
}

// PatchNodeAnnotation sets (value non-nil) or removes one annotation of
// the node, retrying with backoff for up to a minute; how knit-node's
// services publish on their Node.
func PatchNodeAnnotation(ctx context.Context, client kubernetes.Interface, nodeName, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]*string{key: value}},
	})
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	nodes := client.CoreV1().Nodes()
	op := func() error {
		_, err := nodes.Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxElapsedTime = time.Minute
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return fmt.Errorf("annotate node %s: %w", nodeName, err)
	}
	return nil
}

// InitializeApplication tells each service named in serviceData that the
// application has a container starting on the node, with its data, as the
// NodeManager's AuxServices does on APPLICATION_INIT. A name the node does
// not run is an error (RKS refuses such a start before it gets here).
func (h *Host) InitializeApplication(ctx context.Context, user string, app yarnid.ApplicationID, serviceData map[string][]byte) error {
	var errs []error
	for _, name := range sortedNames(serviceData) {
		s, ok := h.services[name]
		if !ok {
			errs = append(errs, fmt.Errorf("auxservice: the auxService:%s does not exist on node %s", name, h.cfg.NodeName))
			continue
		}
		if err := s.InitializeApplication(ctx, Application{User: user, ID: app, ServiceData: serviceData[name]}); err != nil {
			errs = append(errs, fmt.Errorf("auxservice: %s: initialize %s: %w", name, app, err))
		}
	}
	return errors.Join(errs...)
}

// StopApplication tells every service the application ended, as the
// NodeManager's AuxServices does on APPLICATION_STOP.
func (h *Host) StopApplication(ctx context.Context, app yarnid.ApplicationID) error {
	var errs []error
	for _, name := range sortedNames(h.services) {
		if err := h.services[name].StopApplication(ctx, app); err != nil {
			errs = append(errs, fmt.Errorf("auxservice: %s: stop %s: %w", name, app, err))
		}
	}
	return errors.Join(errs...)
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
