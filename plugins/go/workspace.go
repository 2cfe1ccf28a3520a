package agent

import (
	"time"

	"github.com/agentrt/agentrt/plugins/abi"
)

// The task's workspace: files the agent keeps between steps, private to the
// task. Paths are relative and /-separated ("notes/today.md"); uploaded
// artifacts appear at their relative_path/file_name. Absolute paths, ".."
// and the like are refused with ErrBadPath. Writes count against the
// workspace's quota (ErrLimit past it).

// FileInfo describes a workspace file.
type FileInfo struct {
	Path    string
	Size    int64
	ModTime time.Time
}

// ReadFile returns the contents of a workspace file (ErrNotFound if there
// is none).
func ReadFile(path string) ([]byte, error) {
	b, err := sizedRead(func(buf []byte) int32 {
		return hostWorkspaceRead(strPtr(path), uint32(len(path)), ptr(buf), uint32(len(buf)))
	})
	if err != nil {
		return nil, hostError(abi.FuncWorkspaceRead, int32FromErr(err))
	}
	return b, nil
}

// WriteFile creates or replaces a workspace file, making its directories.
func WriteFile(path string, data []byte) error {
	if code := hostWorkspaceWrite(strPtr(path), uint32(len(path)), ptr(data), uint32(len(data))); code < 0 {
		return hostError(abi.FuncWorkspaceWrite, code)
	}
	return nil
}

// ListFiles lists the workspace files whose path starts with prefix ("" for
// all), in path order.
func ListFiles(prefix string) ([]FileInfo, error) {
	b, err := sizedRead(func(buf []byte) int32 {
		return hostWorkspaceList(strPtr(prefix), uint32(len(prefix)), ptr(buf), uint32(len(buf)))
	})
	if err != nil {
		return nil, hostError(abi.FuncWorkspaceList, int32FromErr(err))
	}
	infos, err := abi.DecodeFileInfos(b)
	if err != nil {
		return nil, err
	}
	files := make([]FileInfo, len(infos))
	for i, fi := range infos {
		files[i] = fileInfo(fi)
	}
	return files, nil
}

// Stat describes a workspace file (ErrNotFound if there is none).
func Stat(path string) (FileInfo, error) {
	b, err := sizedRead(func(buf []byte) int32 {
		return hostWorkspaceStat(strPtr(path), uint32(len(path)), ptr(buf), uint32(len(buf)))
	})
	if err != nil {
		return FileInfo{}, hostError(abi.FuncWorkspaceStat, int32FromErr(err))
	}
	fi, err := abi.DecodeFileInfo(b)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfo(fi), nil
}

// Remove deletes a workspace file.
func Remove(path string) error {
	if code := hostWorkspaceDelete(strPtr(path), uint32(len(path))); code < 0 {
		return hostError(abi.FuncWorkspaceDelete, code)
	}
	return nil
}

// PublishFile publishes a workspace file's current contents as an artifact
// named fileName in the directory relativePath, and returns its id. Later
// changes to the file do not change the artifact.
func PublishFile(path, fileName, relativePath string) (string, error) {
	if path == "" {
		return "", &HostError{Func: abi.FuncArtifactCreate, Code: abi.ErrBadPath, Message: "PublishFile needs the path of a workspace file"}
	}
	return createArtifact(abi.ArtifactMeta{FileName: fileName, RelativePath: relativePath, WorkspacePath: path}, nil)
}

// Config returns the operator's settings for this plugin.
func Config() (map[string]string, error) {
	b, err := sizedRead(func(buf []byte) int32 { return hostConfig(ptr(buf), uint32(len(buf))) })
	if err != nil {
		return nil, hostError(abi.FuncConfig, int32FromErr(err))
	}
	return abi.DecodeStrings(b)
}

func fileInfo(fi abi.FileInfo) FileInfo {
	return FileInfo{Path: fi.Path, Size: fi.Size, ModTime: time.UnixMilli(fi.ModTime)}
}
