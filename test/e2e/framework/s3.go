//go:build e2e

package framework

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/tend-dev/tend/api/etcd/v1alpha1"
)

// MotoS3 is an S3 client of the cluster's moto_server, from this machine.
func (c *Cluster) MotoS3() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: awssdk.String(c.Settings.MotoURL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// S3Destination creates a bucket of the test's own in moto (named after
// namespace ns) and a Secret "s3-creds" in ns with moto's credentials, and
// returns an S3 location in that bucket under prefix that the pods reach.
func (c *Cluster) S3Destination(t testing.TB, ns, prefix string) *etcdv1alpha1.S3Location {
	t.Helper()
	bucket := "e2e-" + ns[len(ns)-5:]
	if _, err := c.MotoS3().CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("creating bucket %s in moto: %v", bucket, err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-creds"},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"},
	}
	if err := c.Client.Create(t.Context(), creds); err != nil {
		t.Fatalf("creating Secret %s: %v", creds.Name, err)
	}
	return &etcdv1alpha1.S3Location{
		Bucket: bucket, Prefix: prefix, Region: "us-east-1", Endpoint: c.Settings.MotoURL, ForcePathStyle: true,
		CredentialsSecretRef: &corev1.LocalObjectReference{Name: creds.Name},
	}
}
