package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// The ResourceManager serves ApplicationClientProtocol whole: the methods in
// clientservice.go, and here the answers of a YARN RM whose node labels,
// node attributes, resource profiles and reservation system are off, as they
// always are in Knit (Kubernetes node labels and selectors take their place).
var _ yarnrpc.ApplicationClientProtocolServer = (*ResourceManager)(nil)

// GetResourceTypeInfo lists the cluster's resource types (ResourceTypeInfo).
func (rm *ResourceManager) GetResourceTypeInfo(ctx context.Context, req *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
	return ResourceTypeInfo{Types: rm.cfg.ResourceTypes}.GetResourceTypeInfo(ctx, req)
}

// GetNodeToLabels answers empty, as YARN does with no labels configured; so
// do the other node-label and node-attribute queries.
func (rm *ResourceManager) GetNodeToLabels(context.Context, *yarnpb.GetNodesToLabelsRequestProto) (*yarnpb.GetNodesToLabelsResponseProto, error) {
	return &yarnpb.GetNodesToLabelsResponseProto{}, nil
}

// GetLabelsToNodes answers empty (see GetNodeToLabels).
func (rm *ResourceManager) GetLabelsToNodes(context.Context, *yarnpb.GetLabelsToNodesRequestProto) (*yarnpb.GetLabelsToNodesResponseProto, error) {
	return &yarnpb.GetLabelsToNodesResponseProto{}, nil
}

// GetClusterNodeLabels answers empty (see GetNodeToLabels).
func (rm *ResourceManager) GetClusterNodeLabels(context.Context, *yarnpb.GetClusterNodeLabelsRequestProto) (*yarnpb.GetClusterNodeLabelsResponseProto, error) {
	return &yarnpb.GetClusterNodeLabelsResponseProto{}, nil
}

// GetClusterNodeAttributes answers empty (see GetNodeToLabels).
func (rm *ResourceManager) GetClusterNodeAttributes(context.Context, *yarnpb.GetClusterNodeAttributesRequestProto) (*yarnpb.GetClusterNodeAttributesResponseProto, error) {
	return &yarnpb.GetClusterNodeAttributesResponseProto{}, nil
}

// GetAttributesToNodes answers empty (see GetNodeToLabels).
func (rm *ResourceManager) GetAttributesToNodes(context.Context, *yarnpb.GetAttributesToNodesRequestProto) (*yarnpb.GetAttributesToNodesResponseProto, error) {
	return &yarnpb.GetAttributesToNodesResponseProto{}, nil
}

// GetNodesToAttributes answers empty (see GetNodeToLabels).
func (rm *ResourceManager) GetNodesToAttributes(context.Context, *yarnpb.GetNodesToAttributesRequestProto) (*yarnpb.GetNodesToAttributesResponseProto, error) {
	return &yarnpb.GetNodesToAttributesResponseProto{}, nil
}

// GetResourceProfiles refuses, as YARN does while resource profiles are off.
func (rm *ResourceManager) GetResourceProfiles(context.Context, *yarnpb.GetAllResourceProfilesRequestProto) (*yarnpb.GetAllResourceProfilesResponseProto, error) {
	return nil, errResourceProfiles()
}

// GetResourceProfile refuses (see GetResourceProfiles).
func (rm *ResourceManager) GetResourceProfile(context.Context, *yarnpb.GetResourceProfileRequestProto) (*yarnpb.GetResourceProfileResponseProto, error) {
	return nil, errResourceProfiles()
}

// GetNewReservation refuses, as YARN does without a reservation system; so
// do the other reservation calls.
func (rm *ResourceManager) GetNewReservation(context.Context, *yarnpb.GetNewReservationRequestProto) (*yarnpb.GetNewReservationResponseProto, error) {
	return nil, errReservation()
}

// SubmitReservation refuses (see GetNewReservation).
func (rm *ResourceManager) SubmitReservation(context.Context, *yarnpb.ReservationSubmissionRequestProto) (*yarnpb.ReservationSubmissionResponseProto, error) {
	return nil, errReservation()
}

// UpdateReservation refuses (see GetNewReservation).
func (rm *ResourceManager) UpdateReservation(context.Context, *yarnpb.ReservationUpdateRequestProto) (*yarnpb.ReservationUpdateResponseProto, error) {
	return nil, errReservation()
}

// DeleteReservation refuses (see GetNewReservation).
func (rm *ResourceManager) DeleteReservation(context.Context, *yarnpb.ReservationDeleteRequestProto) (*yarnpb.ReservationDeleteResponseProto, error) {
	return nil, errReservation()
}

// ListReservations refuses (see GetNewReservation).
func (rm *ResourceManager) ListReservations(context.Context, *yarnpb.ReservationListRequestProto) (*yarnpb.ReservationListResponseProto, error) {
	return nil, errReservation()
}
