// Package disktest gives tests a real file system to fill: a small tmpfs
// of their own, for the length of a test, and a way to fill it to the
// last byte. A full disk is hard to fake faithfully (SQLite, the kernel
// and Go each report it their own way, at their own moment), so tests of
// one use a real one.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run runs test on a tmpfs of its own, mounted with options (mount(8)'s
// -o: "size=24m", or "size=8m,nr_inodes=64" to bound its files too) at
// dir for the length of the test. It never skips the test.
//
// As root (as CI runs the tests) it mounts the file system and runs test.
// Where it may not (a user's clone; a container), it runs the test again,
// alone, in a process of its own in a new user and mount namespace, where
// an unprivileged user may mount a tmpfs and which the processes the test
// starts share; the test passes or fails as it does there. The test must
// call Run first: what it does before runs twice then. It fails where
// neither can be done (a kernel or container that forbids user
// namespaces). Setting AGENTRT_TEST_USERNS=1 takes the second way even
// as root.
func Run(t *testing.T, options string, test func(t *testing.T, dir string)) {
	t.Helper()
	inside := os.Getenv(namespaceEnv) == "1"
	if inside || os.Geteuid() == 0 && os.Getenv("AGENTRT_TEST_USERNS") != "1" {
		dir, err := mount(t, options)
		if err == nil {
			test(t, dir)
			return
		}
		if inside {
			t.Fatalf("mount a tmpfs in a user namespace: %v", err)
		}
		t.Logf("mount a tmpfs as root: %v; running the test in a user namespace instead", err)
	}
	runInNamespace(t)
}

// namespaceEnv is set for a test that runInNamespace runs.
const namespaceEnv = "AGENTRT_DISKTEST_NAMESPACE"

// mount mounts a tmpfs with options at a new directory until the test
// ends.
func mount(t testing.TB, options string) (string, error) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mount -t tmpfs -o %s: %v: %s", options, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir, nil
}

// runInNamespace runs the test t alone, in this test binary started again
// in a new user namespace, where this user is root, and a new mount
// namespace, where it may mount a tmpfs; t passes or fails as it does
// there.
func runInNamespace(t *testing.T) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, name := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(name)+"$")
	}
	args := []string{"-test.run=" + strings.Join(run, "/"), "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).String())
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), namespaceEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exit):
		t.Fatalf("mounting a small file system to fill needs root, or a user namespace to mount it in, and this system allows neither: %v", err)
	case err != nil:
		t.Fatalf("in a user namespace of its own, the test failed:\n%s", out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()+" "):
		t.Fatalf("in a user namespace of its own, the test did not run:\n%s", out)
	}
	if testing.Verbose() {
		t.Logf("ran in a user namespace of its own:\n%s", out)
	}
}

// Fill writes a file in dir until the file system is full, to its last
// byte, and returns the file's path: removing it gives the room back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for _, n := range []int{len(chunk), 512, 1} { // then the last bytes
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return name
}

// FillInodes makes empty files in a new directory of dir until the file
// system can hold no more files (its nr_inodes), and returns the
// directory: removing it gives the room back.
func FillInodes(t testing.TB, dir string) string {
	t.Helper()
	fillers := filepath.Join(dir, "fillers")
	if err := os.Mkdir(fillers, 0o750); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(fillers, fmt.Sprint(i)))
		if errors.Is(err, syscall.ENOSPC) {
			return fillers
		} else if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// Free returns the free bytes of dir's file system.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
