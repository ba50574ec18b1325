package router

import (
	"cmp"
	"context"
	"fmt"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// The reservation calls, routed as FederationClientInterceptor routes
// them: a new reservation id from a random active sub-cluster, a
// submission to the home its queue's policy picks (recorded in the store
// first), an update or a deletion to the recorded home, a list to every
// active sub-cluster. A knit-rm has no reservation system and refuses
// each call, so through the Router each ends in the Java Router's
// YarnException for a call every sub-cluster refused.

// reservationKey is ReservationId.toString: reservation_<cluster
// timestamp>_<id, at least four digits>.
func reservationKey(id *yarnpb.ReservationIdProto) string {
	return fmt.Sprintf("reservation_%d_%04d", id.GetClusterTimestamp(), id.GetId())
}

// GetNewReservation asks a random active sub-cluster for a reservation
// id, another one if it fails, up to the retries.
func (r *Router) GetNewReservation(ctx context.Context, req *yarnpb.GetNewReservationRequestProto) (*yarnpb.GetNewReservationResponseProto, error) {
	var resp *yarnpb.GetNewReservationResponseProto
	err := r.onRandomActive(ctx, "create a new reservation", "Failed to create a new reservation.", func(ctx context.Context, sc store.SubClusterInfo) error {
		return r.call(ctx, sc, func(rm *ipc.Client) (err error) {
			resp, err = acp(rm).GetNewReservation(ctx, req)
			return err
		})
	})
	return resp, err
}

// SubmitReservation submits to the home the queue's policy picks, up to
// the retries, recording the home before each try: the first try keeps a
// home already recorded (a resubmission), a later one moves it.
func (r *Router) SubmitReservation(ctx context.Context, req *yarnpb.ReservationSubmissionRequestProto) (*yarnpb.ReservationSubmissionResponseProto, error) {
	if req.GetReservationId() == nil || req.GetReservationDefinition() == nil || req.Queue == nil {
		return nil, yarnerr.YarnException.New("Missing submitReservation request or reservationId or reservation definition or queue.")
	}
	id := reservationKey(req.GetReservationId())
	queue := cmp.Or(req.GetQueue(), defaultQueue)
	for i := 0; i < r.retries; i++ {
		resp, err := r.submitReservationOnce(ctx, req, id, queue, i == 0)
		if err == nil {
			return resp, nil
		}
		r.log.WarnContext(ctx, "unable to submit the reservation", "reservation", id, "try", i, "err", err)
	}
	return nil, yarnerr.YarnException.Errorf("Reservation %s failed to be submitted.", id)
}

func (r *Router) submitReservationOnce(ctx context.Context, req *yarnpb.ReservationSubmissionRequestProto, id, queue string, first bool) (*yarnpb.ReservationSubmissionResponseProto, error) {
	policy, err := r.policyFor(ctx, queue)
	if err != nil {
		return nil, err
	}
	active, err := r.store.GetSubClusters(ctx, true)
	if err != nil {
		return nil, wrapped(err, "Unable to get the active SubClusters from the FederationStateStore.")
	}
	home, err := forSubmission(policy, Submission{Application: id, Queue: queue}, r.machines).home(active, nil, lockedRand{r})
	if err != nil {
		return nil, err
	}
	// As YARN's Router, a home the store cannot read is taken for none.
	if _, getErr := r.store.GetReservationHomeSubCluster(ctx, id); first || getErr != nil {
		if home, err = r.store.AddReservationHomeSubCluster(ctx, store.ReservationHome{Reservation: id, Home: home}); err != nil {
			return nil, wrapped(err, "Unable to insert the ReservationId %s into the FederationStateStore.", id)
		}
	} else if err := r.store.UpdateReservationHomeSubCluster(ctx, store.ReservationHome{Reservation: id, Home: home}); err != nil {
		if stored, err2 := r.store.GetReservationHomeSubCluster(ctx, id); err2 != nil || stored != home {
			return nil, wrapped(err, "Unable to update the ReservationId %s into the FederationStateStore.", id)
		}
	}
	var resp *yarnpb.ReservationSubmissionResponseProto
	err = r.callID(ctx, home, func(rm *ipc.Client) (err error) {
		resp, err = acp(rm).SubmitReservation(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	r.log.InfoContext(ctx, "reservation submitted", "reservation", id, "subCluster", home)
	return resp, nil
}

// onReservationHome makes call on the recorded home of the reservation,
// answering a failed call with YARN's YarnException of the message failed.
func onReservationHome[Resp any](ctx context.Context, r *Router, id *yarnpb.ReservationIdProto, failed string,
	call func(context.Context, *yarnrpc.ApplicationClientProtocolClient) (Resp, error)) (Resp, error) {
	var resp Resp
	key := reservationKey(id)
	home, err := r.store.GetReservationHomeSubCluster(ctx, key)
	if err != nil {
		return resp, wrapped(err, "Can't find reservationId = %s in home sub cluster.", key)
	}
	err = r.callID(ctx, home, func(rm *ipc.Client) (err error) {
		resp, err = call(ctx, acp(rm))
		return err
	})
	if err != nil {
		return resp, wrapped(err, "%s", failed)
	}
	return resp, nil
}

// UpdateReservation sends the update to the reservation's home.
func (r *Router) UpdateReservation(ctx context.Context, req *yarnpb.ReservationUpdateRequestProto) (*yarnpb.ReservationUpdateResponseProto, error) {
	if req.GetReservationId() == nil || req.GetReservationDefinition() == nil {
		return nil, yarnerr.YarnException.New("Missing updateReservation request or reservationId or reservation definition.")
	}
	return onReservationHome(ctx, r, req.GetReservationId(), "Unable to reservation update due to exception.",
		func(ctx context.Context, rm *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.ReservationUpdateResponseProto, error) {
			return rm.UpdateReservation(ctx, req)
		})
}

// DeleteReservation sends the deletion to the reservation's home, and
// forgets the home once it is done.
func (r *Router) DeleteReservation(ctx context.Context, req *yarnpb.ReservationDeleteRequestProto) (*yarnpb.ReservationDeleteResponseProto, error) {
	if req.GetReservationId() == nil {
		return nil, yarnerr.YarnException.New("Missing deleteReservation request or reservationId.")
	}
	const failed = "Unable to reservation delete due to exception."
	resp, err := onReservationHome(ctx, r, req.GetReservationId(), failed,
		func(ctx context.Context, rm *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.ReservationDeleteResponseProto, error) {
			return rm.DeleteReservation(ctx, req)
		})
	if err != nil {
		return nil, err
	}
	if err := r.store.DeleteReservationHomeSubCluster(ctx, reservationKey(req.GetReservationId())); err != nil {
		return nil, wrapped(err, failed)
	}
	return resp, nil
}

// ListReservations lists the reservations of every active sub-cluster;
// a sub-cluster's refusal fails the list, as YARN's Router fails it on a
// sub-cluster's YarnException.
func (r *Router) ListReservations(ctx context.Context, req *yarnpb.ReservationListRequestProto) (*yarnpb.ReservationListResponseProto, error) {
	resps, err := fanOut(ctx, r, "list reservations node", true, func(ctx context.Context, c *yarnrpc.ApplicationClientProtocolClient) (*yarnpb.ReservationListResponseProto, error) {
		return c.ListReservations(ctx, req)
	})
	if err != nil {
		return nil, err
	}
	out := &yarnpb.ReservationListResponseProto{}
	for _, resp := range resps {
		out.Reservations = append(out.Reservations, resp.GetReservations()...)
	}
	return out, nil
}
