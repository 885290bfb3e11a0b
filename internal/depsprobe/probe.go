package depsprobe

import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/openkruise/kruise-api/client/clientset/versioned"
	_ "github.com/openkruise/kruise-api/client/informers/externalversions"
	_ "github.com/openkruise/kruise-api/policy/v1alpha1"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/client-go/informers"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/pkg/controller/deployment"
	_ "k8s.io/kubernetes/pkg/controller/disruption"
	_ "k8s.io/kubernetes/pkg/controller/replicaset"
	_ "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	_ "sigs.k8s.io/descheduler/cmd/descheduler/app"
	_ "sigs.k8s.io/descheduler/pkg/descheduler"
)
