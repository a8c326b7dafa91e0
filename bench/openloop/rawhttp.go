package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// requester sends the run's request once on its connection and returns the response status.
type requester interface {
	do() (status int, err error)
}

var errMalformed = errors.New("malformed HTTP/1.x response")

// rawConn is one keep-alive connection driven by hand: the request bytes are built once, the response
// is framed by Content-Length, chunked encoding or the connection closing, and its body is discarded.
type rawConn struct {
	addr    string
	request []byte
	timeout time.Duration
	dials   func() // counts a new connection
	conn    net.Conn
	br      *bufio.Reader
	reused  bool
}

func requestBytes(c *config) []byte {
	head := "GET " + c.path + " HTTP/1.1\r\nHost: " + c.host + "\r\nUser-Agent: gateway-sizer-openloop\r\nAccept: */*\r\n"
	if c.acceptEncoding != "" {
		head += "Accept-Encoding: " + c.acceptEncoding + "\r\n"
	}
	return []byte(head + "\r\n")
}

func (c *rawConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

func (c *rawConn) do() (int, error) {
	for attempt := 0; ; attempt++ {
		if c.conn == nil {
			conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
			if err != nil {
				return 0, err
			}
			c.dials()
			c.conn, c.reused = conn, false
			if c.br == nil {
				c.br = bufio.NewReaderSize(conn, 32<<10)
			} else {
				c.br.Reset(conn)
			}
		}
		c.conn.SetDeadline(time.Now().Add(c.timeout))
		reused := c.reused
		c.reused = true
		if _, err := c.conn.Write(c.request); err != nil {
			c.close()
			if reused && attempt == 0 && stale(err) {
				continue
			}
			return 0, err
		}
		status, keep, started, err := readResponse(c.br)
		if err != nil || !keep {
			c.close()
		}
		// A kept-alive connection the server closed before answering: send once more on a new one.
		if err != nil && !started && reused && attempt == 0 && stale(err) {
			continue
		}
		return status, err
	}
}

func stale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readResponse reads one response (skipping interim 1xx ones) and discards its body. `started` says
// whether any byte of it arrived; `keep` whether the connection can carry the next request.
func readResponse(br *bufio.Reader) (status int, keep, started bool, err error) {
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			started = true
		}
		if err != nil {
			if err == io.EOF && started {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, started, err
		}
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
			return 0, false, true, errMalformed
		}
		status = 0
		for _, d := range line[9:12] {
			if d < '0' || d > '9' {
				return 0, false, true, errMalformed
			}
			status = status*10 + int(d-'0')
		}
		keep = line[7] == '1'
		contentLength, chunked := int64(-1), false
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return 0, false, true, err
			}
			if len(h) <= 2 && (len(h) == 1 || h[0] == '\r') {
				break
			}
			name, value, ok := bytes.Cut(h, []byte(":"))
			if !ok {
				return 0, false, true, errMalformed
			}
			value = bytes.TrimSpace(value)
			switch {
			case bytes.EqualFold(name, []byte("content-length")):
				if contentLength, ok = parseDecimal(value); !ok {
					return 0, false, true, errMalformed
				}
			case bytes.EqualFold(name, []byte("transfer-encoding")):
				chunked = containsFold(value, "chunked")
			case bytes.EqualFold(name, []byte("connection")):
				if containsFold(value, "close") {
					keep = false
				} else if containsFold(value, "keep-alive") {
					keep = true
				}
			}
		}
		if status >= 100 && status < 200 && status != 101 {
			continue // interim response: the final one follows
		}
		switch {
		case status == 204 || status == 304:
		case chunked:
			err = discardChunked(br)
		case contentLength >= 0:
			_, err = br.Discard(int(contentLength))
		default: // delimited by the connection closing
			_, err = io.Copy(io.Discard, br)
			keep = false
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, false, true, err
		}
		return status, keep, true, nil
	}
}

func discardChunked(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		var size int64
		digits := 0
		for _, b := range line {
			var d byte
			switch {
			case b >= '0' && b <= '9':
				d = b - '0'
			case b >= 'a' && b <= 'f':
				d = b - 'a' + 10
			case b >= 'A' && b <= 'F':
				d = b - 'A' + 10
			default:
				goto done
			}
			size = size<<4 | int64(d)
			digits++
			if digits > 15 {
				return errMalformed
			}
		}
	done:
		if digits == 0 {
			return errMalformed
		}
		if size == 0 { // trailers until an empty line
			for {
				t, err := br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(t) == 1 || (len(t) == 2 && t[0] == '\r') {
					return nil
				}
			}
		}
		if _, err := br.Discard(int(size)); err != nil {
			return err
		}
		if crlf, err := br.ReadSlice('\n'); err != nil {
			return err
		} else if len(crlf) > 2 || (len(crlf) == 2 && crlf[0] != '\r') {
			return errMalformed
		}
	}
}

func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

func containsFold(b []byte, word string) bool {
	for i := 0; i+len(word) <= len(b); i++ {
		if bytes.EqualFold(b[i:i+len(word)], []byte(word)) {
			return true
		}
	}
	return false
}
