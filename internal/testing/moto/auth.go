package moto

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// SetAuth turns moto's IAM checks on or off (POST /moto-api/reset-auth). With
// them on, a request must be signed by an access key that exists in moto's
// IAM (see CreateUser) and be allowed by its policies; the fake AccessKeyID
// no longer works. It holds for the whole server: use it on a server that
// Start made for one test.
func (s *Server) SetAuth(on bool) error {
	count := "inf"
	if on {
		count = "0"
	}
	return s.post("/moto-api/reset-auth", count)
}

// User is an IAM user that CreateUser made, with its one access key.
type User struct {
	Name            string
	AccessKeyID     string
	SecretAccessKey string
}

// CreateUser creates an IAM user with an access key and, unless policy is
// empty, that inline policy (a JSON policy document). Call it while auth is
// off (SetAuth(false), the default).
func (s *Server) CreateUser(name, policy string) (User, error) {
	if err := s.iam(url.Values{"Action": {"CreateUser"}, "UserName": {name}}, nil); err != nil {
		return User{}, err
	}
	if policy != "" {
		put := url.Values{"Action": {"PutUserPolicy"}, "UserName": {name}, "PolicyName": {name}, "PolicyDocument": {policy}}
		if err := s.iam(put, nil); err != nil {
			return User{}, err
		}
	}
	var out struct {
		AccessKeyID     string `xml:"CreateAccessKeyResult>AccessKey>AccessKeyId"`
		SecretAccessKey string `xml:"CreateAccessKeyResult>AccessKey>SecretAccessKey"`
	}
	if err := s.iam(url.Values{"Action": {"CreateAccessKey"}, "UserName": {name}}, &out); err != nil {
		return User{}, err
	}
	if out.AccessKeyID == "" || out.SecretAccessKey == "" {
		return User{}, fmt.Errorf("creating an access key for %s: moto returned none", name)
	}
	return User{Name: name, AccessKeyID: out.AccessKeyID, SecretAccessKey: out.SecretAccessKey}, nil
}

// iam sends one IAM query-protocol call. moto_server routes it by the
// service in the credential scope; it checks no signature while auth is off.
func (s *Server) iam(form url.Values, out any) error {
	form.Set("Version", "2010-05-08")
	req, err := http.NewRequest(http.MethodPost, s.URL+"/", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+AccessKeyID+"/20250101/"+Region+
		"/iam/aws4_request, SignedHeaders=host, Signature=0")
	body, err := s.do(req)
	if err != nil {
		return fmt.Errorf("IAM %s: %w", form.Get("Action"), err)
	}
	if out != nil {
		if err := xml.Unmarshal(body, out); err != nil {
			return fmt.Errorf("IAM %s: decoding %q: %w", form.Get("Action"), body, err)
		}
	}
	return nil
}
