package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/knitdev/knit/rm"
	"github.com/knitdev/knit/rm/store"
	"github.com/knitdev/knit/rm/tokens"
)

// appStore is rm.AppStore over the Kubernetes store.
type appStore struct{ s *store.Store }

func (a appStore) Put(ctx context.Context, id, state, user, queue string, finish time.Time, data []byte) error {
	_, err := a.s.Put(ctx, store.Record{ID: id, State: state, User: user, Queue: queue, FinishTime: finish, Data: data})
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", rm.ErrFenced, err)
	}
	return err
}

func (a appStore) Delete(ctx context.Context, id string) error { return a.s.Delete(ctx, id) }

func (a appStore) List(ctx context.Context) ([]rm.StoredApp, error) {
	recs, err := a.s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]rm.StoredApp, len(recs))
	for i, r := range recs {
		out[i] = rm.StoredApp{ID: r.ID, State: r.State, User: r.User, Queue: r.Queue, FinishTime: r.FinishTime, Data: r.Data}
	}
	return out, nil
}

// keyStore is tokens.KeyStore over the keys Secret.
type keyStore struct{ blob *store.SecretBlob }

func (k keyStore) Load(ctx context.Context) (tokens.Keys, error) {
	data, err := k.blob.Load(ctx)
	if err != nil {
		return tokens.Keys{}, err
	}
	return tokens.DecodeKeys(data)
}

func (k keyStore) Save(ctx context.Context, keys tokens.Keys) error {
	data, err := tokens.EncodeKeys(keys)
	if err != nil {
		return err
	}
	return k.blob.Save(ctx, data)
}
