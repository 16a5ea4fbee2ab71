package main

// The objects: n ConfigMaps or Secrets of o.objectLen bytes of data,
// named cm-0000000.., spread over namespaces headline-00 .. headline-99.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const namespaces = 100

// The kinds of object.
const (
	kindConfigMaps = "configmaps"
	kindSecrets    = "secrets"
)

func namespace(i int) string { return fmt.Sprintf("headline-%02d", i%namespaces) }

func objectName(i int) string { return fmt.Sprintf("cm-%07d", i) }

// objectIndex is the i of objectName(i); -1 for any other name.
func objectIndex(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "cm-%07d", &i); err != nil || objectName(i) != name {
		return -1
	}
	return i
}

// populate creates the namespaces and the objects 0..n-1 with workers
// parallel writers; objects that exist already are kept.
func populate(ctx context.Context, kube kubernetes.Interface, kind string, n, size, workers int) (time.Duration, error) {
	for i := range namespaces {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
	}
	data := map[string]string{"payload": strings.Repeat("x", size)}
	secret := map[string][]byte{"payload": bytes.Repeat([]byte("x"), size)}
	began := time.Now()
	var done atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := 0; i < n && gctx.Err() == nil; i++ {
		g.Go(func() error {
			meta := metav1.ObjectMeta{Name: objectName(i), Namespace: namespace(i)}
			create := func() error {
				if kind == kindSecrets {
					_, err := kube.CoreV1().Secrets(meta.Namespace).Create(gctx, &corev1.Secret{ObjectMeta: meta, Data: secret}, metav1.CreateOptions{})
					return err
				}
				_, err := kube.CoreV1().ConfigMaps(meta.Namespace).Create(gctx, &corev1.ConfigMap{ObjectMeta: meta, Data: data}, metav1.CreateOptions{})
				return err
			}
			var err error
			for attempt := range 8 {
				err = create()
				if err == nil || apierrors.IsAlreadyExists(err) {
					err = nil
					break
				}
				select {
				case <-gctx.Done():
					return gctx.Err()
				case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
				}
			}
			if err != nil {
				return fmt.Errorf("creating %s/%s: %w", meta.Namespace, meta.Name, err)
			}
			if d := done.Add(1); d%50000 == 0 {
				logf("created %d of %d (%.0f/s)", d, n, float64(d)/time.Since(began).Seconds())
			}
			return nil
		})
	}
	err := g.Wait()
	return time.Since(began), err
}
