package rm

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// The ResourceManager serves ApplicationClientProtocol whole: the methods in
// clientservice.go, and here the node-label queries, which answer Knit's
// node-label partitions (nodelabels.go), and the answers of a YARN RM whose
// node attributes, resource profiles and reservation system are off, as they
// always are in Knit (Kubernetes node labels and selectors take their place).
var _ yarnrpc.ApplicationClientProtocolServer = (*ResourceManager)(nil)

// GetResourceTypeInfo lists the cluster's resource types (ResourceTypeInfo).
func (rm *ResourceManager) GetResourceTypeInfo(ctx context.Context, req *yarnpb.GetAllResourceTypeInfoRequestProto) (*yarnpb.GetAllResourceTypeInfoResponseProto, error) {
	return ResourceTypeInfo{Types: rm.cfg.ResourceTypes}.GetResourceTypeInfo(ctx, req)
}

// GetNodeToLabels maps each node in a node-label partition to its label
// (nodeLabelPartitions).
func (rm *ResourceManager) GetNodeToLabels(ctx context.Context, _ *yarnpb.GetNodesToLabelsRequestProto) (*yarnpb.GetNodesToLabelsResponseProto, error) {
	p, err := rm.nodeLabelPartitions(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetNodesToLabelsResponseProto{}
	for _, l := range p {
		for _, n := range l.nodes {
			resp.NodeToLabels = append(resp.NodeToLabels, &yarnpb.NodeIdToLabelsProto{NodeId: n, NodeLabels: []string{l.name}})
		}
	}
	return resp, nil
}

// GetLabelsToNodes maps each label asked (every label when none is) to
// the nodes of its partition; a label no node carries is left out, as
// YARN's label manager leaves it out.
func (rm *ResourceManager) GetLabelsToNodes(ctx context.Context, req *yarnpb.GetLabelsToNodesRequestProto) (*yarnpb.GetLabelsToNodesResponseProto, error) {
	p, err := rm.nodeLabelPartitions(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetLabelsToNodesResponseProto{}
	for _, l := range p {
		if len(l.nodes) == 0 || (len(req.GetNodeLabels()) > 0 && !slices.Contains(req.GetNodeLabels(), l.name)) {
			continue
		}
		resp.LabelsToNodes = append(resp.LabelsToNodes, &yarnpb.LabelsToNodeIdsProto{NodeLabels: proto.String(l.name), NodeId: l.nodes})
	}
	return resp, nil
}

// GetClusterNodeLabels lists the cluster's node labels
// (nodeLabelPartitions), each exclusive, YARN's default.
func (rm *ResourceManager) GetClusterNodeLabels(ctx context.Context, _ *yarnpb.GetClusterNodeLabelsRequestProto) (*yarnpb.GetClusterNodeLabelsResponseProto, error) {
	p, err := rm.nodeLabelPartitions(ctx)
	if err != nil {
		return nil, err
	}
	resp := &yarnpb.GetClusterNodeLabelsResponseProto{}
	for _, l := range p {
		resp.NodeLabels = append(resp.NodeLabels, &yarnpb.NodeLabelProto{Name: proto.String(l.name), IsExclusive: proto.Bool(true)})
	}
	return resp, nil
}

// GetClusterNodeAttributes answers empty, as YARN does with no node
// attributes configured; so do the other node-attribute queries.
func (rm *ResourceManager) GetClusterNodeAttributes(context.Context, *yarnpb.GetClusterNodeAttributesRequestProto) (*yarnpb.GetClusterNodeAttributesResponseProto, error) {
	return &yarnpb.GetClusterNodeAttributesResponseProto{}, nil
}

// GetAttributesToNodes answers empty (see GetClusterNodeAttributes).
func (rm *ResourceManager) GetAttributesToNodes(context.Context, *yarnpb.GetAttributesToNodesRequestProto) (*yarnpb.GetAttributesToNodesResponseProto, error) {
	return &yarnpb.GetAttributesToNodesResponseProto{}, nil
}

// GetNodesToAttributes answers empty (see GetClusterNodeAttributes).
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
