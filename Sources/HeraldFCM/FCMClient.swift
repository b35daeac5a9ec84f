public import HeraldCore
public import HeraldHTTP2

/// Sends FCM HTTP v1 messages for one service account: `POST /v1/projects/{id}/messages:send`,
/// one message per request, multiplexed over the pooled HTTP/2 connections of `client`.
public final class FCMClient: Sendable {
    public let tokens: FCMAccessTokenSource
    private let client: HTTP2Client
    private let sendPath: String
    private let timeoutNanoseconds: UInt64

    /// Creates a client. `client` is connected to FCM (`fcm.googleapis.com:443`, or the simulator).
    public init(tokens: FCMAccessTokenSource, client: HTTP2Client, timeoutNanoseconds: UInt64 = 30_000_000_000) {
        self.tokens = tokens
        self.client = client
        sendPath = tokens.account.sendPath
        self.timeoutNanoseconds = timeoutNanoseconds
    }

    /// Sends one rendered message and classifies the answer.
    public func send(_ message: FCMMessage.Rendered) async -> FCMOutcome {
        await send(body: message.body)
    }

    /// Sends one `messages:send` body. A 401 without an FCM error code (the access token was
    /// refused) causes one token refresh and one retry; a second 401 is a credential fault.
    public func send(body: [UInt8]) async -> FCMOutcome {
        await send(body: body, refreshed: false)
    }

    /// Sends one `messages:send` body as ``send(body:)`` does, calling `completion` with the
    /// outcome instead of suspending: with a valid access token cached (nearly always), the request
    /// goes straight to the pool and `completion` runs on its event loop; a token to fetch or a
    /// refused token continues in a task of its own.
    /// `submissions`: gather the request there, to be sent with others by its owner's
    /// ``HTTP2Submissions/submit()``.
    public func execute(body: [UInt8], submissions: HTTP2Submissions? = nil, completion: @escaping @Sendable (FCMOutcome) -> Void) {
        guard let token = tokens.validToken() else {
            Task { completion(await self.send(body: body, refreshed: false)) }
            return
        }
        let answered: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void = { result in
            switch result {
            case .failure(let error):
                completion(FCMOutcome.classify(error))
            case .success(let response) where Self.tokenRefused(response):
                Task {
                    await self.tokens.invalidate(token)
                    completion(await self.send(body: body, refreshed: true))
                }
            case .success(let response):
                completion(FCMOutcome.classify(response))
            }
        }
        let request = self.request(body: body, token: token)
        if let submissions {
            submissions.add(request, to: client, completion: answered)
        } else {
            client.execute(request, completion: answered)
        }
    }

    private func send(body: [UInt8], refreshed alreadyRefreshed: Bool) async -> FCMOutcome {
        var refreshed = alreadyRefreshed
        while true {
            let token: FCMAccessTokenSource.AccessToken
            do {
                token = try await tokens.token()
            } catch {
                if error.isRetryable { return .retryable(retryAfterSeconds: nil, quotaExceeded: false, detail: error.description) }
                return .credentialFault(detail: error.description)
            }
            let response: HTTP2Response
            do {
                response = try await client.send(request(body: body, token: token))
            } catch {
                return FCMOutcome.classify(error)
            }
            if !refreshed, Self.tokenRefused(response) {
                refreshed = true
                await tokens.invalidate(token)
                continue
            }
            return FCMOutcome.classify(response)
        }
    }

    private func request(body: [UInt8], token: FCMAccessTokenSource.AccessToken) -> HTTP2Request {
        HTTP2Request(pathPrefix: sendPath, pathSuffix: "", body: body, timeoutNanoseconds: timeoutNanoseconds) { fields in
            fields.add("authorization", token.authorization)
            fields.add("content-type", "application/json; charset=UTF-8")
        }
    }

    /// A 401 without an FCM error code: the access token itself was refused.
    private static func tokenRefused(_ response: HTTP2Response) -> Bool {
        response.status == 401 && FCMErrorStatus(body: response.body, httpStatus: 401).errorCode == nil
    }
}
