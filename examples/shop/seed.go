package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// product is the record the shop keeps under product:{id}.
type product struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PriceCents int    `json:"price_cents"`
	Stock      int    `json:"stock"`
}

// seed writes products 1..n, a thousand per round trip.
func seed(ctx context.Context, rdb redis.UniversalClient, n int) error {
	const batch = 1000
	for first := 1; first <= n; first += batch {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for id := first; id < first+batch && id <= n; id++ {
				b, err := json.Marshal(product{ID: strconv.Itoa(id), Name: "Product " + strconv.Itoa(id),
					PriceCents: 100 + id*37%99_900, Stock: id * 7 % 500})
				if err != nil {
					return err
				}
				p.Set(ctx, productKey(strconv.Itoa(id)), b, 0)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("seed products %d..%d: %w", first, min(first+batch-1, n), err)
		}
	}
	return nil
}
