package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"time"
)

// stdClient sends the request through net/http: one Transport for the run, bounded like the raw pool
// (at most --connections connections, all kept alive), HTTP/1.1 only, no proxy, no transparent gzip.
type stdClient struct {
	client  *http.Client
	request *http.Request
}

func newTransport(c *config, dials func()) *http.Transport {
	dialer := &net.Dialer{Timeout: c.timeout}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				dials()
			}
			return conn, err
		},
		MaxIdleConns:        c.connections,
		MaxIdleConnsPerHost: c.connections,
		MaxConnsPerHost:     c.connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		WriteBufferSize:     4 << 10,
		ReadBufferSize:      32 << 10,
	}
}

func newStdClient(c *config, transport *http.Transport) *stdClient {
	req, _ := http.NewRequest("GET", "http://"+c.addr+c.path, nil)
	req.Host = c.host
	req.Header.Set("User-Agent", "gateway-sizer-openloop")
	req.Header.Set("Accept", "*/*")
	if c.acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", c.acceptEncoding)
	}
	return &stdClient{client: &http.Client{Transport: transport, Timeout: c.timeout}, request: req}
}

func (s *stdClient) do() (int, error) {
	resp, err := s.client.Do(s.request)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}
