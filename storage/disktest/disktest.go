// Package disktest gives tests a real file system to fill: a small tmpfs
// of their own, for the length of a test, and a way to fill it to the
// last byte. A full disk is hard to fake faithfully (SQLite, the kernel
// and Go each report it their own way, at their own moment), so tests of
// one use a real one.
package disktest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs with options (mount(8)'s -o: "size=24m", or
// "size=8m,nr_inodes=64" to bound its files too) for the length of the
// test and returns the path of its top directory, which the test and the
// processes it starts use as any directory.
//
// As root (as CI runs the tests) it mounts it on a new directory. Where
// that is not allowed (a user's clone; a container), it mounts it in a
// user and mount namespace of its own, where an unprivileged user may
// mount a tmpfs, held open by a shell that lives as long as the test; the
// path it returns reaches the file system through that shell's root
// (/proc/PID/root/...). It fails the test, never skips it, where neither
// can be done (a kernel or container that forbids user namespaces).
// Setting AGENTRT_TEST_USERNS=1 takes the second way even as root.
func Mount(t testing.TB, options string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 && os.Getenv("AGENTRT_TEST_USERNS") != "1" {
		out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput()
		if err == nil {
			t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
			return dir
		}
		t.Logf("mount tmpfs as root: %v: %s; mounting it in a user namespace instead", err, strings.TrimSpace(string(out)))
	}
	return mountInNamespace(t, options, dir)
}

// mountInNamespace mounts the tmpfs at dir in a new user and mount
// namespace, held by a shell until the test ends.
func mountInNamespace(t testing.TB, options, dir string) string {
	t.Helper()
	// The shell mounts, says so, and waits for its input to close.
	cmd := exec.Command("/bin/sh", "-c", `mount -t tmpfs -o "$1" tmpfs "$2" && echo mounted && read -r _`, "sh", options, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("mounting a small file system to fill needs root, or a user namespace to mount it in, and this system allows neither: %v", err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "mounted" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("mount a tmpfs in a user namespace: %s", strings.TrimSpace(stderr.String()))
	}
	t.Cleanup(func() {
		stdin.Close() // the shell exits, and the file system with its namespace
		cmd.Wait()
	})
	return filepath.Join(fmt.Sprintf("/proc/%d/root", cmd.Process.Pid), dir)
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

