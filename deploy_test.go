package main

// deploy/'s Kubernetes manifests agree with tallyd (issue 24): they decode strictly into the
// fields Kubernetes defines for what they use (kubectl validates only against an API server,
// which tests do not have), the container's args parse with tallyd's own flag set, and the
// ports, probes, volumes, peer names and selectors fit together.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tallyd/tallyd/internal/ociimage"
	"github.com/tallyd/tallyd/loop"
)

// The subset of Kubernetes' API types the manifests use; decoding with KnownFields fails on
// any other field, which catches a misspelt one.
type (
	k8sMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	k8sObject struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       yaml.Node
	}
	k8sServiceSpec struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort intStr `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	k8sPDBSpec struct {
		MinAvailable intStr      `yaml:"minAvailable"`
		Selector     k8sSelector `yaml:"selector"`
	}
	k8sProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port intStr `yaml:"port"`
		} `yaml:"httpGet"`
		PeriodSeconds    int `yaml:"periodSeconds"`
		TimeoutSeconds   int `yaml:"timeoutSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
	}
	k8sContainer struct {
		Name            string   `yaml:"name"`
		Image           string   `yaml:"image"`
		ImagePullPolicy string   `yaml:"imagePullPolicy"`
		Args            []string `yaml:"args"`
		Ports           []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		StartupProbe   *k8sProbe `yaml:"startupProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	k8sStatefulSetSpec struct {
		ServiceName         string      `yaml:"serviceName"`
		Replicas            int         `yaml:"replicas"`
		PodManagementPolicy string      `yaml:"podManagementPolicy"`
		Selector            k8sSelector `yaml:"selector"`
		Template            struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot   bool `yaml:"runAsNonRoot"`
					RunAsUser      int  `yaml:"runAsUser"`
					RunAsGroup     int  `yaml:"runAsGroup"`
					FSGroup        int  `yaml:"fsGroup"`
					SeccompProfile struct {
						Type string `yaml:"type"`
					} `yaml:"seccompProfile"`
				} `yaml:"securityContext"`
				Affinity struct {
					PodAntiAffinity struct {
						Preferred []struct {
							Weight          int `yaml:"weight"`
							PodAffinityTerm struct {
								TopologyKey   string      `yaml:"topologyKey"`
								LabelSelector k8sSelector `yaml:"labelSelector"`
							} `yaml:"podAffinityTerm"`
						} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
					} `yaml:"podAntiAffinity"`
				} `yaml:"affinity"`
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName  string `yaml:"secretName"`
						DefaultMode int    `yaml:"defaultMode"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				AccessModes []string `yaml:"accessModes"`
				Resources   struct {
					Requests map[string]string `yaml:"requests"`
				} `yaml:"resources"`
			} `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	}
)

// intStr is Kubernetes' IntOrString: a port number or a port's name.
type intStr struct {
	Int  int
	Name string
}

func (v *intStr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: not a number or a name", n.Line)
	}
	if i, err := strconv.Atoi(n.Value); err == nil {
		v.Int = i
		return nil
	}
	v.Name = n.Value
	return nil
}

// manifests is deploy/*.yaml's objects by kind and name.
type manifests struct {
	services map[string]k8sServiceSpec
	sets     map[string]k8sStatefulSetSpec
	pdbs     map[string]k8sPDBSpec
	meta     map[string]k8sMeta // by kind/name
}

func readManifests(t *testing.T) manifests {
	t.Helper()
	m := manifests{services: map[string]k8sServiceSpec{}, sets: map[string]k8sStatefulSetSpec{},
		pdbs: map[string]k8sPDBSpec{}, meta: map[string]k8sMeta{}}
	files, _ := filepath.Glob("deploy/*.yaml")
	if len(files) == 0 {
		t.Fatal("no deploy/*.yaml")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			strict := func(v any) {
				// Spec is a yaml.Node; decode it again, strictly (Node.Decode has no
				// KnownFields, so encode it back and use a strict decoder).
				raw, err := yaml.Marshal(&o.Spec)
				if err == nil {
					d := yaml.NewDecoder(bytes.NewReader(raw))
					d.KnownFields(true)
					err = d.Decode(v)
				}
				if err != nil {
					t.Fatalf("%s: %s %s: %v", f, o.Kind, o.Metadata.Name, err)
				}
			}
			want := map[string]string{"Service": "v1", "StatefulSet": "apps/v1", "PodDisruptionBudget": "policy/v1"}[o.Kind]
			if want == "" || o.APIVersion != want {
				t.Fatalf("%s: %s %s of apiVersion %s: want one of Service v1, StatefulSet apps/v1, PodDisruptionBudget policy/v1", f, o.Kind, o.Metadata.Name, o.APIVersion)
			}
			if _, dup := m.meta[o.Kind+"/"+o.Metadata.Name]; dup || o.Metadata.Name == "" {
				t.Fatalf("%s: %s %q is unnamed or defined twice", f, o.Kind, o.Metadata.Name)
			}
			m.meta[o.Kind+"/"+o.Metadata.Name] = o.Metadata
			switch o.Kind {
			case "Service":
				var s k8sServiceSpec
				strict(&s)
				m.services[o.Metadata.Name] = s
			case "StatefulSet":
				var s k8sStatefulSetSpec
				strict(&s)
				m.sets[o.Metadata.Name] = s
			case "PodDisruptionBudget":
				var s k8sPDBSpec
				strict(&s)
				m.pdbs[o.Metadata.Name] = s
			}
		}
	}
	return m
}

// selects tells whether selector picks pods labelled labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func TestDeployManifests(t *testing.T) {
	m := readManifests(t)
	if len(m.sets) != 1 || len(m.pdbs) != 1 || len(m.services) != 2 {
		t.Fatalf("%d StatefulSets, %d PodDisruptionBudgets, %d Services; want 1, 1, 2 (headless and client)", len(m.sets), len(m.pdbs), len(m.services))
	}
	var name string
	var set k8sStatefulSetSpec
	for name, set = range m.sets {
	}
	pod := set.Template.Spec
	labels := set.Template.Metadata.Labels
	if set.Replicas != 3 || set.PodManagementPolicy != "Parallel" {
		t.Errorf("StatefulSet %s: %d replicas, podManagementPolicy %q; want 3, Parallel (a member is ready only with a quorum)", name, set.Replicas, set.PodManagementPolicy)
	}
	if !selects(set.Selector.MatchLabels, labels) {
		t.Errorf("StatefulSet %s: selector %v does not select its pods %v", name, set.Selector.MatchLabels, labels)
	}
	for pdbName, pdb := range m.pdbs {
		if pdb.MinAvailable.Int != 2 || !selects(pdb.Selector.MatchLabels, labels) {
			t.Errorf("PodDisruptionBudget %s: minAvailable %+v, selector %v; want 2, selecting %v", pdbName, pdb.MinAvailable, pdb.Selector.MatchLabels, labels)
		}
	}
	headless, ok := m.services[set.ServiceName]
	if !ok || headless.ClusterIP != "None" || !headless.PublishNotReadyAddresses {
		t.Fatalf("StatefulSet %s's serviceName %q: %v %+v; want a headless Service (clusterIP None) publishing unready pods", name, set.ServiceName, ok, headless)
	}
	for sn, s := range m.services {
		if !selects(s.Selector, labels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", sn, s.Selector, labels)
		}
	}

	// The image's user, run as a non-root numeric user.
	df, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	image, err := ociimage.ParseDockerfile(df)
	df.Close()
	if err != nil {
		t.Fatal(err)
	}
	sc := pod.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser == 0 || fmt.Sprintf("%d:%d", sc.RunAsUser, sc.RunAsGroup) != image.User || sc.FSGroup != sc.RunAsGroup {
		t.Errorf("pod securityContext %+v; want runAsNonRoot, the image's user %s, fsGroup its group (the volume and the key's group)", sc, image.User)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]

	// Every arg is one of tallyd's flags with a good value (args replace the image's CMD).
	var o options
	fs := newFlags(&o, loop.Defaults())
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("container args %q: %v", c.Args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("container args %q: stray arguments %q", c.Args, fs.Args())
	}
	for i := 0; i+1 < len(image.Cmd); i += 2 {
		if f := fs.Lookup(strings.TrimPrefix(image.Cmd[i], "--")); f == nil || !f.Changed || f.Value.String() != image.Cmd[i+1] {
			t.Errorf("container args do not repeat the image's CMD %s %s (args replace CMD)", image.Cmd[i], image.Cmd[i+1])
		}
	}

	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	want := map[string]int{"counter": o.counterPort, "semaphore": o.semaphorePort, "pool": o.poolPort, "slock": o.slockPort}
	_, mp, _ := net.SplitHostPort(o.metricsAddr)
	want["metrics"], _ = strconv.Atoi(mp)
	for p := range image.ExposedPorts {
		n, _ := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
		found := false
		for _, cp := range c.Ports {
			found = found || cp.ContainerPort == n
		}
		if !found {
			t.Errorf("the image exposes %s; the container declares no such port", p)
		}
	}

	// --cluster: the StatefulSet's pods under the headless Service, on the peer port, each
	// pod's --node-id-from-hostname ID naming its own name.
	if !o.cluster.fromHost || o.cluster.nodeID != 0 {
		t.Errorf("args: --node-id-from-hostname %v, --node-id %d; want the ID from the pod name", o.cluster.fromHost, o.cluster.nodeID)
	}
	peers, err := parsePeers(o.cluster.cluster)
	if err != nil {
		t.Fatalf("--cluster: %v", err)
	}
	if len(peers) != set.Replicas {
		t.Errorf("--cluster lists %d members; the StatefulSet has %d replicas", len(peers), set.Replicas)
	}
	for i := range set.Replicas {
		podName := fmt.Sprintf("%s-%d", name, i)
		id, err := nodeIDFromHostname(podName)
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(peers[id])
		if err != nil || host != podName+"."+set.ServiceName {
			t.Errorf("pod %s is node %d; --cluster gives it %q; want host %s.%s", podName, id, peers[id], podName, set.ServiceName)
		}
		want["peer"], _ = strconv.Atoi(port)
	}
	for n, p := range want {
		if ports[n] != p || p == 0 {
			t.Errorf("containerPort %q is %d; tallyd's args listen on %d", n, ports[n], p)
		}
	}
	for sn, s := range m.services {
		for _, p := range s.Ports {
			target := p.TargetPort.Int
			if p.TargetPort.Name != "" {
				target = ports[p.TargetPort.Name]
			}
			if target == 0 || target != p.Port {
				t.Errorf("Service %s port %s: %d to target %+v (container port %d); want the container's port, same number", sn, p.Name, p.Port, p.TargetPort, target)
			}
		}
	}
	if p := headless.Ports; len(p) != 1 || p[0].Port != want["peer"] {
		t.Errorf("headless Service %s ports %+v; want only the peer port %d", set.ServiceName, p, want["peer"])
	}
	for _, s := range m.services {
		for _, p := range s.Ports {
			if s.ClusterIP != "None" && p.Port == want["peer"] {
				t.Errorf("a client Service exposes the peer port %d, which is for members only", p.Port)
			}
		}
	}

	// Probes: /healthz for liveness (and startup), /readyz for readiness, on the metrics port.
	for _, pr := range []struct {
		what  string
		probe *k8sProbe
		path  string
	}{{"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}, {"startupProbe", c.StartupProbe, "/healthz"}} {
		if pr.probe == nil {
			t.Errorf("no %s", pr.what)
			continue
		}
		g := pr.probe.HTTPGet
		port := g.Port.Int
		if g.Port.Name != "" {
			port = ports[g.Port.Name]
		}
		if g.Path != pr.path || port != want["metrics"] {
			t.Errorf("%s: GET %s on port %+v (%d); want %s on the metrics port %d", pr.what, g.Path, g.Port, port, pr.path, want["metrics"])
		}
	}

	// The data volume is the claim template mounted at --data-dir; the key is the Secret's file.
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	if len(set.VolumeClaimTemplates) != 1 || mounts[set.VolumeClaimTemplates[0].Metadata.Name] != o.dataDir {
		t.Errorf("volumeClaimTemplates %+v, mounts %v; want one claim mounted at --data-dir %s", set.VolumeClaimTemplates, mounts, o.dataDir)
	}
	if _, vol := image.Volumes[o.dataDir]; !vol {
		t.Errorf("--data-dir %s is not the image's volume %v", o.dataDir, image.Volumes)
	}
	keyOK := false
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "" && mounts[v.Name] != "" && filepath.Dir(o.cluster.keyFile) == mounts[v.Name] {
			keyOK = v.Secret.DefaultMode == 0o400
		}
	}
	if !keyOK {
		t.Errorf("--cluster-key-file %q is not a file of a Secret volume of mode 0400 mounted there (volumes %+v, mounts %v)", o.cluster.keyFile, pod.Volumes, mounts)
	}
	if csc := c.SecurityContext; csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || !csc.ReadOnlyRootFilesystem {
		t.Errorf("container securityContext %+v; want allowPrivilegeEscalation false, readOnlyRootFilesystem", csc)
	}
}
