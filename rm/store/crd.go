package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/knitdev/knit/rks/launch"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The YarnApplication custom resource, as the pod contract names it for
// knit-node too.
const (
	Group    = launch.ApplicationGroup
	Version  = launch.ApplicationVersion
	Kind     = launch.ApplicationKind
	Resource = launch.ApplicationResource
	// CRDName is the name of the CustomResourceDefinition.
	CRDName = Resource + "." + Group
)

// GVR is the group, version and resource of YarnApplications, for dynamic
// clients.
func GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}
}

// crdGVR is where CustomResourceDefinitions are served. They are read and
// written as unstructured objects, so the module needs no
// apiextensions-apiserver dependency.
func crdGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// CRD returns a new copy of the yarnapplications.knit.io definition, as
// Install creates it and manifests/ should render it. The spec is opaque to
// the API server (x-kubernetes-preserve-unknown-fields) because its layout
// is the RM's: see Record. There is no status subresource: the RM writes
// the whole object.
func CRD() *unstructured.Unstructured {
	column := func(name, typ, path, desc string) any {
		return map[string]any{"name": name, "type": typ, "jsonPath": path, "description": desc}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata": map[string]any{
			"name": CRDName,
		},
		"spec": map[string]any{
			"group": Group,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural":     Resource,
				"singular":   "yarnapplication",
				"kind":       Kind,
				"listKind":   Kind + "List",
				"shortNames": []any{"yapp"},
				"categories": []any{"knit"},
			},
			"versions": []any{map[string]any{
				"name":    Version,
				"served":  true,
				"storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":        "object",
					"description": "A YARN application as the Knit ResourceManager stored it.",
					"properties": map[string]any{
						"spec": map[string]any{
							"type":                                 "object",
							"x-kubernetes-preserve-unknown-fields": true,
						},
					},
				}},
				"additionalPrinterColumns": []any{
					column("State", "string", ".spec.state", "YARN application state"),
					column("User", "string", ".spec.user", "User who submitted the application"),
					column("Queue", "string", ".spec.queue", "Queue the application runs in"),
					column("Age", "date", ".metadata.creationTimestamp", ""),
				},
			}},
		},
	}}
}

// Install creates the CRD when it is missing and waits until the API server
// serves it (condition Established). An existing definition is left as it
// is. It fails at once if the API server rejected the CRD's names.
func (s *Store) Install(ctx context.Context) error {
	crds := s.dyn.Resource(crdGVR())
	err := s.retry(ctx, "install crd", func(ctx context.Context) error {
		_, err := crds.Get(ctx, CRDName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
		_, err = crds.Create(ctx, CRD(), metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // created by another RM, or by an attempt whose answer was lost
		}
		if err == nil {
			s.log.Info("created crd", "crd", CRDName)
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.retry(ctx, "wait for crd established", func(ctx context.Context) error {
		crd, err := crds.Get(ctx, CRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		established, err := crdEstablished(crd)
		if err != nil {
			return err
		}
		if !established {
			return errNotYet
		}
		return nil
	})
}

// crdEstablished reads the CRD's conditions. NamesAccepted=False is an
// error no wait will mend (another CRD holds the names).
func crdEstablished(crd *unstructured.Unstructured) (bool, error) {
	// Absent, null or malformed (a CRD just created has "conditions": null)
	// all mean: not established yet.
	raw, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "status", "conditions")
	conds, _ := raw.([]any)
	established := false
	for _, c := range conds {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		switch cond["type"] {
		case "NamesAccepted":
			if cond["status"] == "False" {
				return false, errors.New("crd names not accepted: " + fmt.Sprint(cond["message"]))
			}
		case "Established":
			established = cond["status"] == "True"
		}
	}
	return established, nil
}
