package rm

import (
	"context"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// The REST API's reservation calls are the client protocol's, as
// RMWebServices makes them of ClientRMService: the RPC methods alone decide
// that Knit has no reservation system. RMWebServices makes them as the REST
// caller but for getNewReservation, which it makes as the RM; the RM
// refuses it before it reads a caller, so NewReservation makes it as the
// REST caller too.

func (c *restCluster) NewReservation(ctx context.Context, user string) error {
	_, err := c.rm.GetNewReservation(as(ctx, user), &yarnpb.GetNewReservationRequestProto{})
	return err
}

func (c *restCluster) SubmitReservation(ctx context.Context, user string, req *yarnpb.ReservationSubmissionRequestProto) error {
	_, err := c.rm.SubmitReservation(as(ctx, user), req)
	return err
}

func (c *restCluster) UpdateReservation(ctx context.Context, user string, req *yarnpb.ReservationUpdateRequestProto) error {
	_, err := c.rm.UpdateReservation(as(ctx, user), req)
	return err
}

func (c *restCluster) DeleteReservation(ctx context.Context, user string, req *yarnpb.ReservationDeleteRequestProto) error {
	_, err := c.rm.DeleteReservation(as(ctx, user), req)
	return err
}

func (c *restCluster) ListReservations(ctx context.Context, user string, req *yarnpb.ReservationListRequestProto) error {
	_, err := c.rm.ListReservations(as(ctx, user), req)
	return err
}
