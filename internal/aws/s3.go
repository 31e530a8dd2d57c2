package aws

import (
	"net/http"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Options shape an S3 client beyond its configuration.
type S3Options struct {
	// UsePathStyle addresses the bucket in the path
	// (http://host/bucket/key) rather than in the host name
	// (http://bucket.host/key), as most S3-compatible stores want.
	UsePathStyle bool
	// ResponseHeaderTimeout bounds how long a request waits for the
	// headers of its answer once it has sent its body, so that an upstream
	// that swallows one part of an upload fails that part long before the
	// call's deadline. Zero leaves only the deadline.
	ResponseHeaderTimeout time.Duration
}

// NewS3 returns an S3 client on cfg, which LoadConfig made: it keeps its
// single attempt per call, its required deadline and its limiter.
//
// When cfg has an endpoint override (an S3-compatible store, such as MinIO
// or moto), the client computes and checks the SDK's flexible checksums
// only where the API requires them: many such stores refuse the trailing
// checksums that the SDK sends to AWS by default. Callers that need the
// integrity of what they store check it themselves (Tend's backup agent
// reads every object back and compares its SHA-256).
func NewS3(cfg awssdk.Config, opts S3Options) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.UsePathStyle
		if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
			o.RequestChecksumCalculation = awssdk.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = awssdk.ResponseChecksumValidationWhenRequired
		}
		if opts.ResponseHeaderTimeout > 0 {
			o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
				t.ResponseHeaderTimeout = opts.ResponseHeaderTimeout
			})
		}
	})
}
