package s3blob

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// apiCode is the S3 error code of err ("NoSuchKey"), or "" when the server
// sent none (a HEAD, or no answer at all).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus is the HTTP status of the server's answer, or 0 when there was
// none.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isMissingObject: the object does not exist (and the bucket does).
func isMissingObject(err error) bool {
	switch apiCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	case "NoSuchBucket":
		return false
	}
	return httpStatus(err) == 404
}

// probe lists the prefix once and turns the usual misconfigurations into
// errors that name the field to fix.
func (s *Store) probe(ctx context.Context, o Options) error {
	_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &s.prefix, MaxKeys: aws.Int32(1)})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("s3blob: open: %w", ctx.Err())
	}
	switch code := apiCode(err); code {
	case "NoSuchBucket":
		return fmt.Errorf("s3blob: blob.bucket %q does not exist at %s: create it, or name an existing bucket: %w", o.Bucket, o.Endpoint, err)
	case "InvalidAccessKeyId", "XAdminUserNotFound":
		return fmt.Errorf("s3blob: blob.access_key_id %q is not known to %s: check it (or AWS_ACCESS_KEY_ID): %w", o.AccessKeyID, o.Endpoint, err)
	case "SignatureDoesNotMatch":
		return fmt.Errorf("s3blob: blob.secret_access_key is not the secret of blob.access_key_id %q (the server computed another request signature): check it (or AWS_SECRET_ACCESS_KEY): %w", o.AccessKeyID, err)
	case "AccessDenied", "AllAccessDisabled":
		return fmt.Errorf("s3blob: blob.access_key_id %q may not list blob.bucket %q: grant it list, get, put and delete on the bucket: %w", o.AccessKeyID, o.Bucket, err)
	case "AuthorizationHeaderMalformed", "PermanentRedirect", "IllegalLocationConstraintException":
		return fmt.Errorf("s3blob: blob.region %q does not match the region of blob.bucket %q: %w", o.Region, o.Bucket, err)
	case "":
		if httpStatus(err) == 0 {
			hint := ""
			if !o.PathStyle {
				hint = fmt.Sprintf(" (requests go to the virtual-hosted address %s.<endpoint host>; servers that take the bucket in the path need blob.path_style = true)", o.Bucket)
			}
			return fmt.Errorf("s3blob: blob.endpoint %s: cannot reach the server%s: %w", o.Endpoint, hint, err)
		}
	}
	return fmt.Errorf("s3blob: open blob.bucket %q at blob.endpoint %s: %w", o.Bucket, o.Endpoint, err)
}
